"""docs/stacks.md's table of stacks says every change point of the data file
(catalog/data/stacks.toml): a mechanism added to the data and not to the page a person reads
fails here (the diffusers 0.31 CogVideoX VAE change point was missing)."""
from pathlib import Path

from vramplan.catalog import stacks

DOC = Path(__file__).resolve().parents[1] / "docs" / "stacks.md"


def _rows(cells: int = 4) -> dict[str, str]:
    """The table rows of `cells` cells by their first cell's name (4: the stacks table,
    3: the mechanism table)."""
    out = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `") and line.count("|") == cells + 1:
            out.setdefault(line.split("`")[1], line)
    return out


def test_every_stack_and_change_point_is_in_the_table():
    rows = _rows()
    assert set(stacks.names()) <= set(rows), set(stacks.names()) - set(rows)
    for name in stacks.names():
        cells = [c.strip() for c in rows[name].strip("|").split("|")]
        said = cells[3]
        for since, mech, on in stacks.change_points(name):
            assert f"{since}: {mech} {'on' if on else 'off'}" in said, (name, since, mech)
        if not stacks.change_points(name):
            assert said == "-", name


def test_every_mechanism_has_a_row_in_the_mechanism_table():
    import tomllib
    data = tomllib.loads((Path(stacks.__file__).parent / "data" / "stacks.toml")
                         .read_text(encoding="utf-8"))
    used = {c["mechanism"] for c in data["change"]} | \
        {m for s in data["stack"] for m in s.get("always", [])}
    rows = _rows(3)
    assert used <= set(rows), sorted(used - set(rows))
