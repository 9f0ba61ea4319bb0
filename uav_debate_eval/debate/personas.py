"""Expert personas of the panel (paper III.D), loaded from YAML so a deployment can add its own experts."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path

import yaml

from uav_debate_eval.core.errors import InputError

BIASES = ("precision", "cohesion", "zero_trust", "neutral")


@dataclass(frozen=True)
class Persona:
    """One expert role. `category` names the metrics category it owns; `bias` drives the rules agent."""

    id: str
    name: str
    category: str
    bias: str = "neutral"
    description: str = ""
    keywords: tuple[str, ...] = field(default_factory=tuple)
    deviation_threshold: float = 0.05
    envelope_fraction: float = 0.10

    def relevance(self, text: str) -> int:
        """How many of this persona's keywords occur in `text` (adaptive rotation picks the maximum)."""
        low = text.lower()
        return sum(low.count(k.lower()) for k in self.keywords)


def _persona(entry: object, source: str) -> Persona:
    if not isinstance(entry, dict) or "id" not in entry:
        raise InputError(f"{source}: each persona needs a mapping with at least `id`")
    known = {f.name for f in fields(Persona)}
    unknown = set(entry) - known
    if unknown:
        raise InputError(f"{source}: persona {entry['id']}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    data = dict(entry)
    data.setdefault("name", str(data["id"]))
    data.setdefault("category", "overall")
    data["keywords"] = tuple(str(k) for k in data.get("keywords", ()))
    if data.get("bias", "neutral") not in BIASES:
        raise InputError(f"{source}: persona {data['id']}: bias must be one of {', '.join(BIASES)}")
    return Persona(**data)


def _read(path: Path | None) -> tuple[dict, str]:
    if path is None:
        text = resources.files("uav_debate_eval.debate").joinpath("personas.yaml").read_text(encoding="utf-8")
        return yaml.safe_load(text) or {}, "personas.yaml"
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}, str(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read personas: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {str(exc).splitlines()[0]}") from None


def merge_personas(base: list[Persona], extra: list[dict] | None, source: str = "<config>") -> list[Persona]:
    """Extra entries replace a persona with the same id or are appended, keeping the base order."""
    out = list(base)
    for entry in extra or []:
        p = _persona(entry, source)
        ids = [q.id for q in out]
        if p.id in ids:
            out[ids.index(p.id)] = p
        else:
            out.append(p)
    return out


def load_personas(path: str | Path | None = None, extra: list[dict] | None = None) -> list[Persona]:
    """The default panel, extended (or replaced id by id) by the `personas:` list of `path` and by `extra`."""
    data, source = _read(None)
    panel = [_persona(e, source) for e in data.get("personas", [])]
    if path is not None:
        more, src = _read(Path(path))
        if not isinstance(more, dict) or not isinstance(more.get("personas", []), list):
            raise InputError(f"{src}: expected a mapping with a `personas:` list")
        panel = merge_personas(panel, more.get("personas"), src)
    return merge_personas(panel, extra)


def generalist_persona() -> Persona:
    """The single agent of the single-agent baseline."""
    data, source = _read(None)
    return _persona(data["generalist"], source)
