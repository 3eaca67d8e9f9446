"""Seed files and labels files are read by one reader: every failure is one line naming the
file (and the line of a bad byte), and a seed file's YAML refuses a label given twice."""
import pytest

from topictk.config.seedfile import read_seed_file
from topictk.config.textfile import read_text_file
from topictk.errors import ConfigError


def test_each_failure_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope.txt: seed file not found; give a file of "
                                          r"'label word' lines \(relative\)$"):
        read_text_file(tmp_path / "nope.txt", 100, "seed file", "'label word' lines",
                       " (relative)")
    with pytest.raises(ConfigError, match=r": is a folder; give a labels file"):
        read_text_file(tmp_path, 100, "labels file", "topic<TAB>label lines")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (2 << 20))
    with pytest.raises(ConfigError, match=r"big.txt: larger than 1 MB, not a labels file"):
        read_text_file(big, 1 << 20, "labels file", "topic<TAB>label lines")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"errors exception\nnumbers \xff int\n")
    with pytest.raises(ConfigError, match=r"bad.txt:2: not UTF-8 text; save the seed file"):
        read_seed_file(bad)


def test_a_seed_label_given_twice_in_yaml_is_refused(tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("errors: [exception]\nnumbers: [int]\nerrors: [raise]\n")
    with pytest.raises(ConfigError, match=r"seeds.yaml: .*errors.*twice"):
        read_seed_file(seeds)


def test_a_line_separator_inside_a_seed_line_starts_no_new_line(tmp_path):
    # split as white space between words, not as the end of a line (whose next word would
    # be read as a label without words)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("errors exception\u2028raise\nnumbers int\n", encoding="utf-8")
    assert read_seed_file(seeds) == {"errors": ["exception", "raise"], "numbers": ["int"]}
