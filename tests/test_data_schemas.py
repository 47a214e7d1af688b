"""The data files' schemas (cibuildwheel's way: a JSON Schema file beside each reader, held by
tests): each is valid JSON Schema and uses only what base/schema.py interprets; every shipped
data file passes both jsonschema and the tool's own reader; the two agree on damaged files; and
no reader reads a key its schema does not declare.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Set, Tuple

import jsonschema
import pytest

from jetson_install.base import schema, toml_file
from jetson_install.base.errors import CatalogError
from jetson_install.base.schema import Key
from jetson_install.base.toml_file import FORMATS, TomlData, load_toml

TOP = Path(__file__).resolve().parent.parent
PACKAGE = TOP / "jetson_install"
SCHEMAS = sorted(PACKAGE.rglob("*.schema.json"))
DATA_SCHEMAS = [path for path in SCHEMAS if path.name != "evidence.schema.json"]
# Each shipped data file and the schema its reader checks it against.
SHIPPED = [
    (TOP / "wheels-index.toml", PACKAGE / "catalog" / "wheels-index.schema.json"),
    (PACKAGE / "board" / "platform-data.toml", PACKAGE / "board" / "platform-data.schema.json"),
    (PACKAGE / "planning" / "bitsandbytes-releases.toml", PACKAGE / "planning" / "bitsandbytes-releases.schema.json"),
    (PACKAGE / "planning" / "routes" / "preflight.toml", PACKAGE / "planning" / "routes" / "preflight.schema.json"),
    (PACKAGE / "catalog" / "gpu-code-rules.toml", PACKAGE / "catalog" / "gpu-code-rules.schema.json"),
]
CONFIG_SCHEMA = PACKAGE / "catalog" / "config.schema.json"


def validator(path: Path) -> Any:
    checker = jsonschema.FormatChecker(formats=())
    for name, check in FORMATS.items():
        # A format judges strings only; the type keyword judges the rest.
        checker.checks(name)(lambda value, check=check: not isinstance(value, str) or check(value))
    return jsonschema.Draft202012Validator(json.loads(path.read_text()), format_checker=checker)


def test_every_data_file_the_package_reads_has_its_schema() -> None:
    shipped = sorted(path.name for path in PACKAGE.rglob("*.toml"))
    assert shipped == sorted(data.name for data, _ in SHIPPED if data.parent != TOP), shipped
    assert sorted([path for _, path in SHIPPED] + [CONFIG_SCHEMA]) == DATA_SCHEMAS


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda path: path.name)
def test_each_schema_is_valid_json_schema_in_the_subset_the_tool_interprets(path: Path) -> None:
    document = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"

    def keywords(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                if key in ("properties", "$defs"):
                    for item in value.values():
                        yield from keywords(item)
                elif key not in ("dependentRequired", "enum", "const", "required"):
                    yield from keywords(value)
        elif isinstance(node, list):
            for item in node:
                yield from keywords(item)

    unknown = sorted(set(keywords(document)) - schema.KEYWORDS)
    assert not unknown, f"{path.name} uses keywords base/schema.py does not interpret: {unknown}"
    formats = set(re.findall(r'"format": "([^"]+)"', path.read_text()))
    assert formats <= set(FORMATS), formats - set(FORMATS)


@pytest.mark.parametrize(("data", "schema_path"), SHIPPED, ids=lambda path: path.name)
def test_every_shipped_data_file_passes_jsonschema_and_the_reader(data: Path, schema_path: Path) -> None:
    errors = [error.message for error in validator(schema_path).iter_errors(load_toml(data))]
    assert not errors, errors
    TomlData(data, "check", schema_path)  # raises on a problem


def test_the_documented_configuration_passes_its_schema() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", (TOP / "docs" / "fleets.md").read_text(), re.S)
    assert blocks
    check = validator(CONFIG_SCHEMA)
    for block in blocks:
        assert not list(check.iter_errors(toml_file.loads_toml(block))), block


def _places(data: Any, path: Tuple[Key, ...] = ()) -> Iterator[Tuple[Key, ...]]:
    yield path
    if isinstance(data, dict):
        for key, item in data.items():
            yield from _places(item, path + (key,))
    elif isinstance(data, list):
        for number, item in enumerate(data):
            yield from _places(item, path + (number,))


def _damaged(data: Any, path: Tuple[Key, ...], how: str) -> Any:
    """A copy with the value at `path` dropped, retyped, given an unknown key, or emptied."""
    damaged = copy.deepcopy(data)
    holder = damaged
    for key in path[:-1]:
        holder = holder[key]
    value = holder[path[-1]]
    if how == "drop":
        del holder[path[-1]]
    elif how == "retype":
        holder[path[-1]] = 12345 if isinstance(value, str) else "x"
    elif how == "unknown" and isinstance(value, dict):
        value["zz_unknown"] = "x"
    elif how == "empty":
        holder[path[-1]] = type(value)() if isinstance(value, (str, list, dict)) else -1
    return damaged


@pytest.mark.parametrize(("data", "schema_path"), SHIPPED, ids=lambda path: path.name)
def test_the_tool_and_jsonschema_agree_on_damaged_files(data: Path, schema_path: Path) -> None:
    # As test_schema holds the evidence's interpreter to jsonschema: every kind of damage at
    # places spread over the file (about 30 a file, to keep the run short).
    loaded = load_toml(data)
    document = json.loads(schema_path.read_text())
    check = validator(schema_path)
    places = [path for path in _places(loaded) if path]
    step = max(1, len(places) // 30)
    for number, path in enumerate(places[::step]):
        how = ("drop", "retype", "unknown", "empty")[number % 4]
        damaged = _damaged(loaded, path, how)
        ours = schema.problems(damaged, document, formats=FORMATS)
        theirs = list(check.iter_errors(damaged))
        assert bool(ours) == bool(theirs), (how, path, ours, [error.message for error in theirs])


class _Traced(Dict[str, Any]):
    """A table that records every key read from it (by [], get or in), under its path with
    array indexes as '*'."""

    def __init__(self, data: Dict[str, Any], path: Tuple[str, ...], seen: Set[Tuple[str, ...]]) -> None:
        super().__init__({key: _traced(item, path + (key,), seen) for key, item in data.items()})
        self._path, self._seen = path, seen

    def __getitem__(self, key: str) -> Any:
        self._seen.add(self._path + (key,))
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._seen.add(self._path + (key,))
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._seen.add(self._path + (str(key),))
        return super().__contains__(key)


def _traced(data: Any, path: Tuple[str, ...], seen: Set[Tuple[str, ...]]) -> Any:
    if isinstance(data, dict):
        return _Traced(data, path, seen)
    if isinstance(data, list):
        return [_traced(item, path + ("*",), seen) for item in data]
    return data


def _declared(document: Dict[str, Any], path: Tuple[str, ...]) -> bool:
    """Whether the schema declares the key `path` ends with (a table's own key, or any key of
    a table whose keys are data, like [socs])."""
    node: Any = document
    for key in path:
        node = schema.resolve(node, document)
        if key == "*":
            node = node.get("items")
        elif key in node.get("properties", {}):
            node = node["properties"][key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return False
        if not isinstance(node, dict):
            return False
    return True


def test_no_reader_reads_a_key_its_schema_does_not_declare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from jetson_install.board import platform_data
    from jetson_install.catalog import catalog, gpu_code, settings
    from jetson_install.planning import bitsandbytes_source
    from jetson_install.planning.routes import preflight

    seen: Set[Tuple[str, ...]] = set()
    plain = toml_file.loads_toml
    monkeypatch.setattr(toml_file, "loads_toml", lambda text, path=Path("x"): _traced(plain(text, path), (), seen))
    config = tmp_path / "config.toml"
    monkeypatch.setenv("JETSON_INSTALL_CONFIG", str(config))
    config.write_text('vendor_index = "https://a.example/simple"\ndefault_index = "https://b.example/simple"\n'
                      'allow_insecure_index = false\nmirrors = ["https://c.example/simple"]\nwheelhouse = "/srv/w"\n')
    readers: List[Tuple[Path, Callable[[], object]]] = [
        (PACKAGE / "catalog" / "wheels-index.schema.json", lambda: catalog._load_catalog.__wrapped__(TOP / "wheels-index.toml")),
        (PACKAGE / "board" / "platform-data.schema.json", lambda: platform_data.platform_data.__wrapped__(platform_data.DATA_FILE)),
        (PACKAGE / "planning" / "bitsandbytes-releases.schema.json", bitsandbytes_source.load_releases),
        (PACKAGE / "planning" / "routes" / "preflight.schema.json", preflight._newest_default_index_cpu),
        (CONFIG_SCHEMA, lambda: settings.load_index_settings(None, "", None, "", False)),
        (PACKAGE / "catalog" / "gpu-code-rules.schema.json", lambda: gpu_code.load_rules.__wrapped__(gpu_code.RULES_FILE)),
    ]
    assert {path for path, _ in readers} == set(DATA_SCHEMAS)  # a new data file's reader is traced too
    for schema_path, read in readers:
        seen.clear()
        toml_file._parsed.cache_clear()  # a text parsed before, untraced, is parsed again here
        read()
        document = json.loads(schema_path.read_text())
        assert len(seen) > 3, schema_path.name  # the tracing reached the reader
        undeclared = sorted(path for path in seen if not _declared(document, path))
        assert not undeclared, f"{schema_path.name} does not declare what its reader reads: {undeclared}"


def _message(tmp_path: Path, text: str, schema_path: Path) -> str:
    path = tmp_path / "data.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as caught:
        TomlData(path, "jetson-install check", schema_path)
    return caught.value.message


def test_an_unknown_key_gets_the_nearest_known_one_or_the_list(tmp_path: Path) -> None:
    text = (PACKAGE / "planning" / "routes" / "preflight.toml").read_text()
    schema_path = PACKAGE / "planning" / "routes" / "preflight.schema.json"
    near = _message(tmp_path, text.replace("torchaudio =", "torch_audio ="), schema_path)
    assert near.endswith("[newest_default_index_cpu]: key 'torch_audio' is unknown; did you mean 'torchaudio'?")
    far = _message(tmp_path, text + "\n[other]\nx = 1\n", schema_path)
    assert far.endswith("top level: key 'other' is unknown (known: newest_default_index_cpu)")
    assert f"{tmp_path / 'data.toml'}:{len(text.splitlines()) + 2}:" in far


def test_a_mistake_deep_in_an_array_names_the_entrys_own_line(tmp_path: Path) -> None:
    text = (TOP / "wheels-index.toml").read_text()
    old = '{ requirement = "nvidia-cufft-cu12==11.4.1.4", provides = ["libcufft.so.11"] }'
    message = _message(tmp_path, text.replace(old, old.replace("libcufft.so.11", "cufft")),
                       PACKAGE / "catalog" / "wheels-index.schema.json")
    line = next(n for n, row in enumerate((tmp_path / "data.toml").read_text().splitlines(), 1) if '"cufft"' in row)
    assert message.startswith(f"{tmp_path / 'data.toml'}:{line}: channel 'jp7.2-orin' source: key 'companions' "
                              'has "cufft": it must be a soname as DT_NEEDED names it'), message
