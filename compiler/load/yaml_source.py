"""Safe YAML with a line number for every key and item.

PyYAML's safe loader builds plain dicts and forgets where things were. We compose the node graph
ourselves instead, so that each value remembers its line (errors must point at it), duplicate keys
are refused (PyYAML keeps the last one silently), and alias expansion is bounded (a "billion laughs"
document would otherwise expand into gigabytes).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..diagnostics import Diagnostic, InputError, Path, format_path

# libyaml's parser when PyYAML has it (8x faster on large fleets); the node graph is the same either way.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_OPENERS = ("while scanning a quoted scalar", "while parsing a flow", "while scanning a block scalar")

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000  # after alias expansion; the whole shipped fleet uses a few thousand
MAX_DEPTH = 64  # nesting levels; intents use about ten, and Python's recursion would give out near 1,000
# libyaml's composer recurses in C per nesting level: tens of thousands of `[` crash the process, so
# deep flow brackets and runs of block indicators (`- - -`, `? ? ?`) are refused before the parser sees them.
_FLOW_BRACKET = re.compile(r"[\[\]{}]")
_COMPACT_SEQUENCE = re.compile(r"(?:[-?][ \t]+){" + str(MAX_DEPTH) + "}")  # `- - -`, `? ? ?` (explicit keys), mixed
# Core schema tags only: no python/object construction, no custom tags (the safe loader would refuse
# most of them on scalars, but it never sees tags on collections we build ourselves).
_STANDARD_TAGS = tuple(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge"))


@dataclass
class SourceDoc:
    """One YAML document: its value, and where each path of it came from.

    The line map is built only when someone asks for a line (an error, a finding), by parsing the
    document's text again: a large fleet has hundreds of thousands of values and almost never an
    error, and keeping every parsed node alive would cost memory and garbage-collector time.
    """

    file: str
    index: int
    value: Any
    text: str = field(default="", repr=False, compare=False)  # the whole file, shared by its documents
    start_line: int = 1
    _lines: dict[Path, int] | None = field(default=None, repr=False, compare=False)

    @property
    def lines(self) -> dict[Path, int]:
        if self._lines is None:
            self._lines = _line_map(_document_node(self.text, self.index)) if self.text else {}
        return self._lines

    def line_of(self, path: Path) -> int:
        """Line of `path`, or of its nearest ancestor that exists (a missing field's parent)."""
        lines = self.lines
        path = tuple(path)
        while path:
            if path in lines:
                return lines[path]
            path = path[:-1]
        return self.start_line

    def error(self, path: Path, message: str, hint: str = "", severity: str = "error") -> Diagnostic:
        return Diagnostic(self.file, self.line_of(path), format_path(path), message, hint, severity)  # type: ignore[arg-type]

    @property
    def ref(self) -> str:
        """`file#doc`, the provenance written into every emitted object."""
        return f"{self.file}#{self.index}"


def _document_node(text: str, index: int) -> yaml.Node | None:
    loader = _Loader(text)
    try:
        i = 0
        while loader.check_node():  # libyaml's get_node must not be called past the last document
            node = loader.get_node()
            if i == index:
                return node
            i += 1
        return None
    finally:
        loader.dispose()


def _line_map(root: yaml.Node | None, budget: int = MAX_NODES) -> dict[Path, int]:
    """Path -> line of every key and item (keys give their own line, items their first line). Merge keys are
    not followed (their values sit at the anchor's lines anyway), and at most `budget` nodes are visited: aliases
    make the paths of a small document exponential in number (nested `<<` of two aliases each), and a message
    then points at the nearest ancestor that was mapped."""
    lines: dict[Path, int] = {}
    if root is None:
        return lines
    stack: list[tuple[yaml.Node, Path]] = [(root, ())]
    while stack and budget > 0:
        budget -= 1
        node, path = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE:
                    child = path + (key_node.value,)
                    lines.setdefault(child, key_node.start_mark.line + 1)
                    stack.append((value_node, child))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, path + (i,)) for i, item in enumerate(node.value))
    return lines


def _fail(file: str, line: int, message: str, hint: str = "") -> InputError:
    return InputError([Diagnostic(file, line, "(document)", message, hint)])


def decode(data: bytes, file: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    if len(data) > max_bytes:
        raise _fail(
            file, 0,
            f"file is {len(data) / 1024 / 1024:.1f} MiB; gpuc reads intent files up to {max_bytes // 1024 // 1024} MiB",
            "intent files are short by design; split the fleet into several files or remove generated content",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _fail(file, line, f"file is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                    "save the file as UTF-8") from None
    return text


def check_nesting(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH before a parser recurses into it (brackets inside quotes
    count too: no real intent or export has 64 unbalanced ones)."""
    depth = 0
    openers = text.count("[") + text.count("{")
    for m in _FLOW_BRACKET.finditer(text) if openers > MAX_DEPTH else ():  # fewer openers cannot nest deeper
        if m.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _nesting_error(file, text.count("\n", 0, m.start()) + 1)
        elif depth:
            depth -= 1
    for number, line in enumerate(text.split("\n"), 1):
        # a run of MAX_DEPTH indicators sits on one line at least twice as long ([ \t] excludes newlines)
        if len(line) >= 2 * MAX_DEPTH and _COMPACT_SEQUENCE.search(line):
            raise _nesting_error(file, number)


def _nesting_error(file: str, line: int) -> InputError:
    return _fail(file, line, f"values are nested more than {MAX_DEPTH} levels deep",
                 "intents nest a few levels; look for runaway brackets or indentation")


def parse_documents(text: str, file: str, max_nodes: int = MAX_NODES) -> list[SourceDoc]:
    """All non-empty documents of a YAML stream, each with its line map."""
    check_nesting(text, file)
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # the pure-Python reader refuses control characters up front
        raise _reader_error(text, file, exc) from None
    docs: list[SourceDoc] = []
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None or (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"):
                index += 1
                continue
            value = _Builder(loader, file, max_nodes).build(node, ())
            docs.append(SourceDoc(file, index, value, text, node.start_mark.line + 1))
            index += 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if exc.context_mark and (exc.context or "").startswith(_OPENERS):
            mark = exc.context_mark  # an unclosed quote or bracket: point where it was opened, not where parsing gave up
        line = mark.line + 1 if mark else 0
        problem = exc.problem or str(exc)
        hint = ""
        if "\\t" in problem or "tab" in problem.lower() or (mark and _has_tab(text, mark.line)):
            hint = "YAML indentation must use spaces, not tabs"
        elif "mapping values are not allowed" in problem:
            hint = "a value containing ': ' needs quotes, or the line above is indented wrongly"
        raise _fail(file, line, f"invalid YAML: {problem}" + (f" ({exc.context})" if exc.context else ""), hint) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, file, exc) from None
    except yaml.YAMLError as exc:
        raise _fail(file, 0, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return docs


def _reader_error(text: str, file: str, exc: yaml.reader.ReaderError) -> InputError:
    line = text[: exc.position].count("\n") + 1
    return _fail(file, line, f"invalid YAML: {exc.reason} (character {exc.character!r})",
                 "remove the control character; intents are plain text")


def _has_tab(text: str, line_index: int) -> bool:
    lines = text.splitlines()
    return 0 <= line_index < len(lines) and "\t" in lines[line_index]


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, file: str, max_nodes: int = MAX_NODES) -> None:
        self.constructors = loader.yaml_constructors
        self.loader = loader
        self.file = file
        self.count = 0
        self.max_nodes = max_nodes

    def scalar(self, node: yaml.ScalarNode, path: Path) -> Any:
        if node.tag == _STR:  # most scalars: skip the constructor machinery
            return node.value
        constructor = self.constructors.get(node.tag)
        if constructor is None:  # `<<` anywhere but as a key: YAML's merge key, which has no value of its own
            raise InputError([Diagnostic(self.file, node.start_mark.line + 1, format_path(path),
                                         f"'{node.value}' is YAML's merge key, which can only be a key", "quote it if you meant the text")])
        try:
            value = constructor(self.loader, node)
        except Exception:
            kind = node.tag.rsplit(":", 1)[-1]
            raise InputError([Diagnostic(self.file, node.start_mark.line + 1, format_path(path),
                                         f"'{node.value}' reads as a YAML {kind} but is not a valid one",
                                         "quote it if you meant the text")]) from None
        if isinstance(value, (datetime.date, datetime.datetime)):
            return node.value  # keep dates as the text the user wrote
        return value

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        if len(path) > MAX_DEPTH:  # block-style nesting the text scan does not see
            raise _nesting_error(self.file, node.start_mark.line + 1)
        if self.count > self.max_nodes:
            raise _fail(self.file, node.start_mark.line + 1,
                        f"document expands to more than {self.max_nodes} values (anchors and aliases?)",
                        "gpuc's inputs never need YAML aliases; write the values out")
        if not node.tag.startswith(_STANDARD_TAGS):
            raise InputError([Diagnostic(self.file, node.start_mark.line + 1, format_path(path),
                                         f"YAML tag '{node.tag}' is not allowed", "intents use plain YAML values; remove the tag")])
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)  # resolves `<<` merge keys
            result: dict[str, Any] = {}
            first_line: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise InputError([Diagnostic(self.file, key_node.start_mark.line + 1, format_path(path),
                                             "mapping keys must be plain strings", "write the key as text, without [ ] or { }")])
                key = self.scalar(key_node, path)
                if not isinstance(key, str):
                    key = str(key) if not isinstance(key, bool) else str(key).lower()
                if key in result:
                    raise InputError([Diagnostic(
                        self.file, key_node.start_mark.line + 1, format_path(path + (key,)),
                        f"duplicate key '{key}' (first at line {first_line[key]})",
                        "YAML keeps only one of them; delete or merge the duplicate")])
                first_line[key] = key_node.start_mark.line + 1
                result[key] = self.build(value_node, path + (key,))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)
        value = self.scalar(node, path)
        if isinstance(value, bytes):
            raise _fail(self.file, node.start_mark.line + 1, f"{format_path(path)}: binary values are not supported")
        return value
