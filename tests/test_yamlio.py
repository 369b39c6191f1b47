"""pebench.util.yamlio reads YAML as PyYAML's safe loader does: the same data from every committed claims file and
config, and a bad document is PyYAML's error with its line and column."""

from pathlib import Path

import pytest
import yaml

from pebench.util.yamlio import load_yaml

ROOT = Path(__file__).resolve().parent.parent


def test_every_committed_yaml_reads_as_the_safe_loader_reads_it():
    files = [*ROOT.glob("results/**/*.yaml"), *ROOT.glob("configs/*.yaml")]
    assert len(files) >= 15
    for f in files:
        text = f.read_text()
        assert load_yaml(text) == yaml.safe_load(text), f


def test_a_bad_document_is_yamls_error_with_its_place_and_no_object_is_built():
    with pytest.raises(yaml.YAMLError) as e:
        load_yaml("a: [1, 2\nb: 3\n")
    assert e.value.problem_mark is not None and e.value.problem_mark.line >= 1
    with pytest.raises(yaml.YAMLError):  # the safe subset: no Python object from a tag
        load_yaml("!!python/object/apply:os.system ['true']")
