"""What a driver can do is declared once, in its ``traits`` (topictk/inference/base.py,
``Traits``): every registered driver has one, offers only report sections it implements, the
config refuses ``model.alpha: auto`` for every driver whose traits do not learn alpha with one
message, and nothing outside the registry probes a driver with hasattr or getattr."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from topictk.errors import ConfigError
from topictk.inference import registry
from topictk.inference.base import REPORT_SECTIONS, Driver, Traits
from topictk.inference.registry import algorithm_names, get_driver, load_config

PACKAGE = Path(__file__).resolve().parents[2] / "topictk"


@pytest.mark.parametrize("name", algorithm_names())
def test_every_driver_declares_its_traits_and_implements_its_report_sections(name):
    driver = get_driver(name)
    assert isinstance(driver.traits, Traits)
    for section in driver.traits.report:
        method = REPORT_SECTIONS[section]
        assert getattr(driver, method) is not getattr(Driver, method), (name, section)
    # the deep drivers are the layered ones, and they show the tree
    assert driver.traits.layered == (driver.traits.family == "dlda") == driver.traits.offers(
        "tree")


def test_a_driver_offering_a_section_it_does_not_implement_is_refused(monkeypatch):
    class Half(get_driver("gibbs")):
        name = "gibbs"
        traits = get_driver("gibbs").traits.but(report={"features"})

    with pytest.raises(TypeError, match="offers the report section 'features' but does not "
                                        "implement feature_table"):
        registry.register(Half)
    with pytest.raises(ValueError, match="unknown report sections"):
        Traits(report={"maps"})


# deep LDA has no model.alpha (its layers' priors are its own)
@pytest.mark.parametrize("name", [n for n in algorithm_names()
                                  if get_driver(n).traits.family != "dlda"])
def test_alpha_auto_is_refused_once_for_every_driver_that_does_not_learn_it(name, tmp_path):
    traits = get_driver(name).traits
    raw = {"corpus": str(tmp_path), "output": str(tmp_path / "run"),
           "model": {"topics": 3, "alpha": "auto"},
           "inference": {"algorithm": name, "iterations": 10}}
    learners = ", ".join(n for n in algorithm_names() if get_driver(n).traits.alpha_auto)
    if traits.alpha_auto:
        assert load_config(None, raw=raw).model.alpha == "auto"
        return
    with pytest.raises(ConfigError) as caught:
        load_config(None, raw=raw)
    assert str(caught.value).startswith(
        f"model.alpha: auto is not available for {name}; give a number (the algorithms that "
        f"learn alpha: {learners})")


def test_nothing_outside_the_registry_probes_a_driver():
    """Evaluation, training and the commands read a driver's traits: no hasattr or getattr
    on a driver (or its class) anywhere but the registry."""
    probe = re.compile(r"\b(?:hasattr|getattr)\(\s*(?:type\()?[\w.]*driver", re.IGNORECASE)
    found = [f"{path.relative_to(PACKAGE)}:{n}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "registry.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if probe.search(line)]
    assert found == []
