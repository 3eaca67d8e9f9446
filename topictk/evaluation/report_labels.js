// topictk report: topic labels and representative documents. Each run's labels come from
// its labels file, a seeded topic's seed words or a suggestion; a label edited on the page
// is kept in the browser's localStorage under the run's key and saved, with the others, as
// labels.tsv (topic numbered from data.first_topic <TAB> label). The representative
// documents of the topic selected are listed under its bars.
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var first = data.first_topic === undefined ? 1 : data.first_topic;
  var sections = document.querySelectorAll("section.run[data-run]");
  for (var i = 0; i < sections.length; i++) {
    var run = data.runs[+sections[i].getAttribute("data-run")];
    if (run && run.labels) setupLabels(sections[i], run);
  }

  function clean(text) { return String(text).replace(/\s+/g, " ").trim(); }

  function load(key) {
    try { return JSON.parse(window.localStorage.getItem(key) || "{}") || {}; }
    catch (e) { return {}; }
  }

  function store(key, edits) {
    try { window.localStorage.setItem(key, JSON.stringify(edits)); }
    catch (e) { /* storage off (a private window): the edits last while the page is open */ }
  }

  function setupLabels(section, run) {
    var edits = load(run.label_key);
    var body = section.querySelector("table.labels tbody");
    var docs = section.querySelector(".topic-docs");
    var K = run.labels.length;

    // topic k of the page: its number, and the key of its edits (its model row, which an
    // HDP run's live topic keeps while the page's order follows the topics' sizes)
    function number(k) { return run.ids ? run.ids[k] : k + first; }
    function key(k) { return number(k) - first; }
    function label(k) { return key(k) in edits ? edits[key(k)] : run.labels[k].text; }
    function source(k) { return key(k) in edits ? "edited here" : run.labels[k].source; }

    for (var k = 0; k < K; k++) body.appendChild(row(k));

    function row(k) {
      var tr = document.createElement("tr");
      tr.appendChild(document.createElement("td")).textContent = String(number(k));
      var input = document.createElement("input");
      input.type = "text";
      input.className = "topic-label";
      input.setAttribute("data-topic-label", k);
      input.setAttribute("aria-label", "label of topic " + number(k));
      input.value = label(k);
      var from = document.createElement("td");
      from.className = "label-source dim small";
      from.textContent = source(k);
      input.addEventListener("change", function () {
        var text = clean(input.value);
        if (text === run.labels[k].text) delete edits[key(k)]; else edits[key(k)] = text;
        input.value = label(k);
        from.textContent = source(k);
        store(run.label_key, edits);
        showDocs(current);
      });
      tr.appendChild(document.createElement("td")).appendChild(input);
      tr.appendChild(from);
      return tr;
    }

    section.querySelector("button.save-labels").addEventListener("click", function () {
      var lines = [run.labels_header];
      for (var k = 0; k < K; k++) {
        var text = clean(label(k));
        if (text) lines.push(number(k) + "\t" + text);
      }
      var link = document.createElement("a");
      link.href = "data:text/tab-separated-values;charset=utf-8," +
        encodeURIComponent(lines.join("\n") + "\n");
      link.download = "labels.tsv";
      document.body.appendChild(link);
      link.click();
      document.body.removeChild(link);
    });

    var current = -1;
    section.addEventListener("topicselect", function (event) { showDocs(event.detail.topic); });
    showDocs(-1);

    function showDocs(k) {
      current = k;
      if (!docs) return;
      while (docs.firstChild) docs.removeChild(docs.firstChild);
      var head = docs.appendChild(document.createElement("h3"));
      if (k < 0 || !run.docs) {
        head.textContent = "Representative documents: select a topic";
        return;
      }
      var name = clean(label(k));
      head.textContent = "Topic " + number(k) + (name ? " · " + name : "") +
        ": representative training documents";
      var note = docs.appendChild(document.createElement("p"));
      note.className = "dim small";
      note.textContent = "share = " + run.docs_share + "; largest first" +
        (run.snippets ? "" : "; the store keeps no text (prepare --snippets N keeps it)");
      var list = docs.appendChild(document.createElement("ol"));
      run.docs[k].forEach(function (d) {
        var li = list.appendChild(document.createElement("li"));
        var id = li.appendChild(document.createElement("span"));
        id.className = "doc-id";
        id.textContent = d.document;
        var share = li.appendChild(document.createElement("span"));
        share.className = "doc-share dim";
        share.textContent = " " + d.share.toFixed(3) + " ";
        if (d.snippet) {
          var text = li.appendChild(document.createElement("span"));
          text.className = "doc-snippet";
          text.textContent = d.snippet;
        }
      });
    }
  }
})();
