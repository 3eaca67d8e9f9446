// topictk report: bar charts of a run's topics, drawn when a topic is selected or lambda
// moves. Relevance of term w to topic k: lambda ln phi_kw + (1 - lambda) ln(phi_kw / p_w)
// (Sievert & Shirley 2014), the numbers coming from the page's JSON data block. Topics are
// numbered from data.first_topic wherever the page names one; data-topic attributes and the
// data's arrays hold the model's 0-based rows. Hovering or focusing a term's bar resizes the
// map's circles to P(topic | term); the topic box, Previous/Next and the arrow keys select.
"use strict";
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var sections = document.querySelectorAll("section.run[data-run]");
  for (var i = 0; i < sections.length; i++) {
    setup(sections[i], data.runs[+sections[i].getAttribute("data-run")]);
  }

  function node(name, attrs, text) {
    var el = document.createElementNS(NS, name);
    for (var key in attrs) el.setAttribute(key, attrs[key]);
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function niceStep(max) {
    var raw = max / 4, step = Math.pow(10, Math.floor(Math.log10(raw)));
    var factors = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < factors.length; i++) {
      if (raw <= factors[i] * step) return factors[i] * step;
    }
    return 10 * step;
  }

  function short(v) {
    if (v >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
    if (v >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
    return String(+v.toPrecision(3));
  }

  function setup(section, run) {
    var state = { topic: -1 };
    var K = run.share.length;
    // topic row k's number: k + first_topic, or an HDP run's live topic's own (run.ids)
    function topicNumber(k) { return run.ids ? run.ids[k] : k + data.first_topic; }
    var sizes = mapSizes(section, run);
    var nav = topicNav(section, K, select, topicNumber);
    var slider = section.querySelector("input.lambda");
    var shown = section.querySelector(".lambda-value");
    var svg = section.querySelector("svg.bars");
    var title = section.querySelector(".bars-title");
    var features = section.querySelector(".features");
    var timePanel = section.querySelector(".time");
    var targets = section.querySelectorAll("[data-topic]");
    for (var i = 0; i < targets.length; i++) {
      targets[i].addEventListener("click", choose);
      targets[i].addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); choose.call(this); }
      });
    }
    slider.addEventListener("input", draw);
    draw();

    function choose() {
      var k = +this.getAttribute("data-topic");
      select(state.topic === k ? -1 : k);
    }

    // topic row k selected (-1: none), everywhere the section shows it
    function select(k) {
      state.topic = k;
      for (var i = 0; i < targets.length; i++) {
        targets[i].classList.toggle("selected", +targets[i].getAttribute("data-topic") === state.topic);
      }
      nav.show(k);
      draw();
    }

    function rows() {
      if (state.topic < 0) {
        return run["default"].map(function (w) {
          return { term: run.vocab[w], total: run.total[w], freq: null, id: w };
        });
      }
      var t = run.topic[state.topic], lambda = +slider.value;
      var items = t.terms.map(function (w, j) {
        return { term: run.vocab[w], total: run.total[w], freq: t.freq[j], id: w,
                 relevance: lambda * t.logprob[j] + (1 - lambda) * t.loglift[j] };
      });
      items.sort(function (a, b) { return b.relevance - a.relevance || a.id - b.id; });
      return items.slice(0, run.n_terms);
    }

    function heading() {
      if (state.topic < 0) return "Most salient terms (no topic selected)";
      var k = state.topic;
      return "Topic " + topicNumber(k) + " · " + (100 * run.share[k]).toFixed(1) + "% of tokens · " +
        (run.weights ? "π " + run.weights.pi[k].toFixed(3) + " · " : "") + "NPMI " +
        run.npmi[k].toFixed(3);
    }

    function draw() {
      shown.textContent = (+slider.value).toFixed(2);
      title.textContent = heading();
      var items = rows(), left = 118, right = 14, top = 30, row = 15, width = 460;
      var height = top + row * items.length + 34;
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      sizes.shares();                     // the hovered bar, if any, is redrawn
      svg.setAttribute("height", height);
      svg.setAttribute("viewBox", "0 0 " + width + " " + height);
      var max = Math.max.apply(null, items.map(function (d) { return d.total; }).concat([1]));
      var step = niceStep(max), end = Math.ceil(max / step) * step;
      var scale = function (v) { return left + v / end * (width - left - right); };
      for (var v = 0; v <= end + step / 2; v += step) {
        svg.appendChild(node("line", { x1: scale(v), x2: scale(v), y1: top - 4,
          y2: top + row * items.length, "class": "gridline" }));
        svg.appendChild(node("text", { x: scale(v), y: top - 8, "text-anchor": "middle",
          "class": "tick" }, short(v)));
      }
      items.forEach(function (d, j) {
        var y = top + j * row;
        var group = termRow(d.id, d.term);
        var total = node("rect", { x: left, y: y + 1, width: Math.max(scale(d.total) - left, 0.5),
          height: row - 3, "class": "bar-total" });
        total.appendChild(node("title", {}, d.term + ": " + Math.round(d.total) + " in the corpus"));
        group.appendChild(total);
        if (d.freq !== null) {
          var part = node("rect", { x: left, y: y + 1, width: Math.max(scale(d.freq) - left, 0.5),
            height: row - 3, "class": "bar-topic" });
          part.appendChild(node("title", {}, d.term + ": " + d.freq.toFixed(1) + " expected in topic " +
            topicNumber(state.topic) + " of " + Math.round(d.total)));
          group.appendChild(part);
        }
        var label = d.term.length > 18 ? d.term.slice(0, 17) + "…" : d.term;
        group.appendChild(node("text", { x: left - 6, y: y + row - 4, "text-anchor": "end",
          "class": "term" }, label));
        svg.appendChild(group);
      });
      var ly = top + row * items.length + 18;
      svg.appendChild(node("rect", { x: left, y: ly - 9, width: 12, height: 10, "class": "bar-total key" }));
      svg.appendChild(node("text", { x: left + 17, y: ly }, "corpus frequency"));
      if (state.topic >= 0) {
        svg.appendChild(node("rect", { x: left + 140, y: ly - 9, width: 12, height: 10, "class": "bar-topic key" }));
        svg.appendChild(node("text", { x: left + 157, y: ly }, "expected in topic " + topicNumber(state.topic)));
      }
      if (features) drawFeatures();
      if (timePanel) drawTime();
      // report_labels.js lists the selected topic's documents
      section.dispatchEvent(new CustomEvent("topicselect", { detail: { topic: state.topic } }));
    }

    function drawFeatures() {
      while (features.firstChild) features.removeChild(features.firstChild);
      var head = document.createElement("h3");
      features.appendChild(head);
      if (state.topic < 0) {
        head.textContent = "Metadata weights: select a topic";
        return;
      }
      head.textContent = "Metadata weights of topic " + topicNumber(state.topic) + " (largest ν)";
      var table = document.createElement("table");
      var header = table.appendChild(document.createElement("thead")).appendChild(
        document.createElement("tr"));
      ["feature", "weight ν", "against the mean of the topics"].forEach(function (text) {
        header.appendChild(document.createElement("th")).textContent = text;
      });
      var body = document.createElement("tbody");
      run.features[state.topic].forEach(function (f) {
        var tr = document.createElement("tr");
        [f.feature, f.weight.toFixed(3), (f.contrast >= 0 ? "+" : "") + f.contrast.toFixed(3)]
          .forEach(function (text) {
            var td = document.createElement("td");
            td.textContent = text;
            tr.appendChild(td);
          });
        body.appendChild(tr);
      });
      table.appendChild(body);
      features.appendChild(table);
    }

    // a dynamic topic model's topic over the time slices: its prevalence, and the
    // probabilities of its words in every slice's version of it
    function drawTime() {
      while (timePanel.firstChild) timePanel.removeChild(timePanel.firstChild);
      var head = document.createElement("h3");
      timePanel.appendChild(head);
      var time = run.time;
      if (state.topic < 0) {
        head.textContent = "Over time: select a topic";
        return;
      }
      head.textContent = "Topic " + topicNumber(state.topic) + " over time";
      var k = state.topic, T = time.slices.length;
      timePanel.appendChild(lineChart("prevalence (% of a document of the slice)",
        [{ name: "prevalence", values: time.prevalence[k].map(function (v) { return 100 * v; }) }],
        time.slices, "time-prevalence"));
      timePanel.appendChild(lineChart("p(word | topic, slice)",
        time.words[k].map(function (w, j) { return { name: w, values: time.series[k][j] }; }),
        time.slices, "time-words"));
    }

    function lineChart(title, lines, slices, cls) {
      var width = 460, left = 54, right = 96, top = 22, height = 150, bottom = 34;
      var svg = node("svg", { "class": "time-chart " + cls, width: width,
        height: height + top + bottom, viewBox: "0 0 " + width + " " + (height + top + bottom),
        role: "img", "aria-label": title });
      svg.appendChild(node("text", { x: left, y: 14, "class": "tick" }, title));
      var max = 0;
      lines.forEach(function (l) { l.values.forEach(function (v) { max = Math.max(max, v); }); });
      var step = niceStep(max > 0 ? max : 1), end = Math.ceil((max > 0 ? max : 1) / step) * step;
      var n = slices.length;
      var x = function (i) { return left + (n > 1 ? i / (n - 1) : 0.5) * (width - left - right); };
      var y = function (v) { return top + height - v / end * height; };
      for (var v = 0; v <= end + step / 2; v += step) {
        svg.appendChild(node("line", { x1: left, x2: width - right, y1: y(v), y2: y(v),
          "class": "gridline" }));
        svg.appendChild(node("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end",
          "class": "tick" }, short(v)));
      }
      var every = Math.max(1, Math.ceil(n / 8));
      slices.forEach(function (s, i) {
        if (i % every === 0 || i === n - 1) {
          svg.appendChild(node("text", { x: x(i), y: top + height + 16, "text-anchor": "middle",
            "class": "tick" }, s));
        }
      });
      lines.forEach(function (l, j) {
        var points = l.values.map(function (v, i) { return x(i).toFixed(1) + "," + y(v).toFixed(1); });
        var line = node("polyline", { points: points.join(" "), "class": "time-line series-" + (j % 8),
          fill: "none" });
        line.appendChild(node("title", {}, l.name));
        svg.appendChild(line);
        svg.appendChild(node("text", { x: width - right + 4, y: y(l.values[n - 1]) + 4,
          "class": "time-label series-" + (j % 8) }, l.name));
      });
      return svg;
    }

    // one bar chart row: hovering or focusing it shows P(topic | term) on the map
    function termRow(w, term) {
      var group = node("g", { "class": "term-row", tabindex: "0", "data-word": w,
        "aria-label": term + ": show P(topic | term) on the map" });
      var show = function () { sizes.term(w); };
      var hide = function () { sizes.shares(); };
      group.addEventListener("mouseenter", show);
      group.addEventListener("focus", show);
      group.addEventListener("mouseleave", hide);
      group.addEventListener("blur", hide);
      return group;
    }

    section.addEventListener("keydown", function (event) {
      var tag = event.target.tagName.toLowerCase();
      if (tag === "input" || tag === "textarea" || tag === "select") return;
      if (event.key === "ArrowRight") { event.preventDefault(); nav.step(+1); }
      else if (event.key === "ArrowLeft") { event.preventDefault(); nav.step(-1); }
    });
  }

  // The map's circle sizes: the topics' shares of the corpus's tokens, or P(topic | term) of
  // word w (an index into the run's words): phi_kw p(k) / sum_j phi_jw p(j), which the page
  // data carries as [row, probability, ...] per word (run.term_topics). Circle area is the
  // same multiple of either (the map's data-scale), so the sizes compare.
  function mapSizes(section, run) {
    var map = section.querySelector("svg.map");
    var caption = section.querySelector(".map-sizes");
    var circles = map.querySelectorAll("circle.topic");
    var scale = +map.getAttribute("data-scale"), least = +map.getAttribute("data-min-radius");
    function resize(values, text) {
      for (var i = 0; i < circles.length; i++) {
        var k = +circles[i].getAttribute("data-topic");
        circles[i].setAttribute("r", Math.max(Math.sqrt(scale * values[k]), least).toFixed(1));
      }
      caption.textContent = text;
    }
    return {
      shares: function () { resize(run.share, "circle area: share of tokens"); },
      term: function (w) {
        var values = run.share.map(function () { return 0; });
        var pairs = run.term_topics[w];
        for (var j = 0; j + 1 < pairs.length; j += 2) values[pairs[j]] = pairs[j + 1];
        resize(values, "circle area: P(topic | '" + run.vocab[w] + "')");
      }
    };
  }

  // The topic box with Previous and Next: shows the selected topic's number (empty: none) and
  // selects the topic typed, or the one before or after (wrapping round), through select(row).
  function topicNav(section, K, select, topicNumber) {
    var box = section.querySelector("input.topic-number");
    var error = section.querySelector(".topic-number-error");
    var current = -1;
    function step(by) {
      var k = current < 0 ? (by > 0 ? 0 : K - 1) : (current + by + K) % K;
      select(k);
    }
    section.querySelector("button.topic-prev").addEventListener("click", function () { step(-1); });
    section.querySelector("button.topic-next").addEventListener("click", function () { step(+1); });
    box.addEventListener("input", function () {
      var text = box.value.trim();
      if (text === "") { error.hidden = true; select(-1); return; }
      var n = Number(text), k = -1;
      for (var j = 0; j < K; j++) if (topicNumber(j) === n) k = j;
      if (!Number.isInteger(n) || k < 0) {
        error.textContent = "no topic " + text + ": " + (K && topicNumber(K - 1) - topicNumber(0) === K - 1
          ? "topics are numbered " + topicNumber(0) + " to " + topicNumber(K - 1)
          : "the topics shown are " + shownNumbers());
        error.hidden = false;
        return;
      }
      error.hidden = true;
      select(k);
    });
    function shownNumbers() {
      var all = [];
      for (var j = 0; j < K; j++) all.push(topicNumber(j));
      return all.join(", ");
    }
    return {
      step: step,
      show: function (k) {
        current = k;
        var text = k < 0 ? "" : String(topicNumber(k));
        var typed = document.activeElement === box && Number(box.value) === topicNumber(k);
        if (box.value !== text && !typed) box.value = text;      // keep "03" while typing
        error.hidden = true;
      }
    };
  }
})();
