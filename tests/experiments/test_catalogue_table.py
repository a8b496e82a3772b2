"""The committed catalogue page (docs/catalogue.md) is in sync with the PE registry.

After registering a PE, regenerate the page with ``python -m experiments.catalogue_table --docs``.
"""
import pytest

import posjax.encodings as pe
from experiments import catalogue_table


def _committed_rows():
    with open(catalogue_table.DOCS_PAGE) as f:
        lines = [line.rstrip("\n") for line in f]
    header = "| " + " | ".join(catalogue_table.HEADER) + " |"
    assert header in lines, "docs/catalogue.md lost its table header"
    rows = {}
    for line in lines[lines.index(header) + 2:]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        name, hooks, relative, stress, paper = cells[0].strip("`"), *cells[1:4], " | ".join(cells[4:])
        rows[name] = {"hook": hooks, "relative": relative, "stress": stress, "paper": paper}
    return rows


def test_committed_catalogue_lists_every_registered_pe_with_its_registry_entry():
    rows = _committed_rows()
    hint = "regenerate with: python -m experiments.catalogue_table --docs"
    assert sorted(rows) == pe.names(), hint
    for name in pe.names():
        entry = pe.info(name)
        assert rows[name]["hook"] == entry.hook, (name, hint)
        assert rows[name]["relative"] == ("yes" if entry.relative else "no"), (name, hint)
        assert rows[name]["paper"] == entry.paper, (name, hint)


@pytest.mark.slow
def test_committed_catalogue_stress_values_are_reproduced():
    committed = _committed_rows()
    for row in catalogue_table.catalogue_rows():
        want = "—" if row["stress_opt"] is None else f"{row['stress_opt']:.3f}"
        assert committed[row["pe"]]["stress"] == want, row["pe"]


def test_committed_catalogue_lists_the_schedule_presets():
    with open(catalogue_table.DOCS_PAGE) as f:
        page = f.read()
    assert catalogue_table.render_schedules() in page, (
        "regenerate with: python -m experiments.catalogue_table --docs")
