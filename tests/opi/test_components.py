"""opi.components: a component's dataclass fields are its config schema; ``build`` makes it from config by
``_target_`` with the run-time resources it accepts; ``check`` builds it without them and names where it failed."""
import dataclasses

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from opi.components import RESOURCES, accepted, build, check, component_schema, target_of, with_resources
from tests.helpers.toy_components import Open, Toy

TOY = "tests.helpers.toy_components.Toy"


def test_target_of_is_the_dotted_path_hydra_imports():
    assert target_of(Toy) == TOY


def test_the_schema_has_the_settings_with_their_defaults_and_no_resources():
    schema = component_schema(Toy)
    fields = {f.name: f for f in dataclasses.fields(schema)}
    assert list(fields) == ["_target_", "size", "name", "tags", "weight"]  # no embedder, no init=False field
    assert fields["_target_"].default == TOY and fields["name"].default == "toy"
    assert fields["tags"].default_factory() == ["a"] and fields["weight"].default is None
    assert OmegaConf.is_missing(OmegaConf.structured(schema), "size")  # no default: the config must give it
    assert "embedder" in RESOURCES


def test_a_misspelt_or_ill_typed_setting_fails_while_composing():
    config = OmegaConf.structured(component_schema(Toy))
    with pytest.raises(ConfigKeyError, match="Key 'sise' not in 'ToyConfig'"):
        OmegaConf.merge(config, {"sise": 3})
    with pytest.raises(ValidationError, match="'big' of type 'str' could not be converted to Integer"):
        OmegaConf.merge(config, {"size": "big"})


def test_only_dataclasses_have_a_schema():
    with pytest.raises(TypeError, match="tests.helpers.toy_components.Open is not a dataclass"):
        component_schema(Open)


def test_accepted_names_the_resources_a_class_takes():
    assert accepted(Toy, ["embedder", "client", "seed"]) == {"embedder"}
    assert accepted(Open, ["embedder", "client"]) == {"embedder", "client"}  # **options takes anything


def test_build_passes_the_settings_and_only_the_resources_the_class_accepts():
    embedder = object()
    toy = build(OmegaConf.create({"_target_": TOY, "size": 2, "tags": ["x"]}), embedder=embedder, client="C")
    assert (toy.size, toy.name, toy.tags, toy.weight) == (2, "toy", ["x"], None)
    assert toy.embedder is embedder  # the run's own object, not a copy
    assert type(toy.tags) is list  # plain data, not OmegaConf containers
    plain = build({"_target_": TOY, "size": 1})  # a plain dict works too
    assert plain.size == 1 and plain.embedder is None
    opened = build({"_target_": "tests.helpers.toy_components.Open", "size": 3}, embedder="E", client="C")
    assert opened.size == 3 and opened.options == {"embedder": "E", "client": "C"}


@pytest.mark.parametrize("config, message", [
    ({"_target_": TOY, "size": 0}, "Toy: size must be >= 1, got 0"),  # the component's own message, unwrapped
    ({"_target_": TOY, "size": 1, "colour": "red"}, "Toy: Toy.__init__() got an unexpected keyword argument 'colour'"),
    ({"_target_": "tests.helpers.nowhere.Toy"}, "cannot import 'tests.helpers.nowhere.Toy' (_target_)"),
])
def test_build_errors_name_the_component(config, message):
    with pytest.raises(ValueError, match=f"^{message}".replace("(", r"\(").replace(")", r"\)")):
        build(config)


def test_check_names_where_the_component_was_configured():
    with pytest.raises(ValueError, match=r"^retrievers\.toy: Toy: size must be >= 1, got 0$"):
        check({"_target_": TOY, "size": 0}, "retrievers.toy")
    assert check({"_target_": TOY, "size": 5}, "retriever").size == 5


def test_with_resources_gives_a_copy_the_resources_it_accepts():
    toy = Toy(size=2)
    embedder = object()
    given = with_resources(toy, embedder=embedder, client="C")
    assert given.embedder is embedder and given.size == 2 and toy.embedder is None  # the original is untouched
    opened = Open(size=4)
    copied = with_resources(opened, client="C")
    assert copied.client == "C" and copied.size == 4 and not hasattr(opened, "client")
