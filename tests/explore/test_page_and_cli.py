"""The page file, the committed bundle, `python -m tinytensor.explore`, examples/explore_gpt.py."""

import hashlib
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tinytensor as tt

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "tinytensor" / "explore" / "static"
EXAMPLE = ROOT / "examples" / "explore_gpt.py"
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "tinytensor.explore", *map(str, args)],
        capture_output=True, text=True, timeout=300, env=ENV, cwd=ROOT,
    )  # fmt: skip


def embedded_graph(page: Path) -> dict:
    match = re.search(r'<script type="application/json" id="tt-graph">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)  # fmt: skip
    return json.loads(match.group(1).replace("<\\/", "</"))


def test_the_committed_bundle_was_built_from_the_committed_sources():
    # build.mjs writes the sha256 of package-lock.json and src/* into the bundle's first line
    digest = hashlib.sha256()
    explorer = ROOT / "explorer"
    files = ["package-lock.json"] + sorted(f"src/{p.name}" for p in (explorer / "src").iterdir())
    for name in files:
        digest.update(f"{name}\n".encode())
        digest.update((explorer / name).read_bytes())
    first_line = (STATIC / "explorer.js").read_text(encoding="utf-8").split("\n", 1)[0]
    assert digest.hexdigest() in first_line, "explorer/src changed: run `npm run build` there"


def test_every_bundled_package_is_pinned_and_its_licence_shipped():
    lock = json.loads((ROOT / "explorer" / "package-lock.json").read_text())
    package = json.loads((ROOT / "explorer" / "package.json").read_text())
    licences = (STATIC / "THIRD_PARTY_LICENSES.txt").read_text(encoding="utf-8")
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} is not pinned: {version}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
        assert f"{name} {version} (" in licences and "Permission" in licences


def test_a_page_embeds_the_graph_and_loads_no_file(tmp_path):
    x = tt.randn(3, 4, requires_grad=True)
    loss = (x.relu() * 2).sum()
    result = tt.explore(loss, params={"x": x}, path=tmp_path / "g.html", title="a </script> title")
    data = embedded_graph(result.path)
    assert data == json.loads(json.dumps(result.data))
    page = result.path.read_text(encoding="utf-8")
    assert page.count("</script>") == 2  # the data's and the bundle's: nothing closes them early
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert result.size_bytes == result.path.stat().st_size and result.num_steps == 3


def test_jupyter_shows_the_page_inline(tmp_path):
    x = tt.randn(2, requires_grad=True)
    result = tt.explore((x * x).sum(), path=tmp_path / "g.html")
    frame = result._repr_html_()
    assert frame.startswith("<iframe srcdoc=")
    assert html.unescape(frame.split('srcdoc="', 1)[1].split('" style=', 1)[0]).startswith(
        "<!doctype html>"
    )


def test_the_module_is_callable_after_an_import_of_the_package(tmp_path):
    import tinytensor.explore  # sets tt.explore to the package, as `python -m` does

    x = tt.randn(2, requires_grad=True)
    assert tt.explore((x * 3).sum(), path=tmp_path / "g.html").num_ops == 2
    assert tinytensor.explore.explore is tt.explore.explore


def test_cli_explores_a_model_script_and_a_saved_graph(tmp_path):
    done = run_cli(EXAMPLE, "-o", tmp_path / "gpt.html")
    assert done.returncode == 0, done.stderr
    data = embedded_graph(tmp_path / "gpt.html")
    assert len(data["steps"]) > 30 and any(m["name"] == "blocks.1" for m in data["modules"])

    x = tt.randn(3, requires_grad=True)
    tt.explore((x.exp() * x).sum(), params={"x": x}, path=tmp_path / "saved.json")
    done = run_cli(tmp_path / "saved.json")
    assert done.returncode == 0, done.stderr
    names = {n["name"] for n in embedded_graph(tmp_path / "saved.html")["nodes"]}
    assert {"x", "Exp", "Mul", "Sum"} <= names


@pytest.mark.parametrize(
    "args, message",
    [(["missing.py"], "'missing.py' does not exist"),
     (["pyproject.toml"], "must be a .json graph or a .py script"),
     (["README.md"], "must be a .json graph or a .py script")],
)  # fmt: skip
def test_cli_errors_are_clear(args, message):
    done = run_cli(*args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_cli_names_a_missing_global_and_a_foreign_json(tmp_path):
    script = tmp_path / "m.py"
    script.write_text("import tinytensor as tt\nout = tt.randn(2, requires_grad=True).sum()\n")
    done = run_cli(script)
    assert done.returncode == 2 and "defines no global 'loss'; pass --output NAME" in done.stderr
    assert run_cli(script, "--output", "out").returncode == 0
    (tmp_path / "other.json").write_text('{"a": 1}')
    done = run_cli(tmp_path / "other.json")
    assert done.returncode == 2 and "is not a graph saved by tt.explore" in done.stderr


def test_the_example_writes_a_page(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--n-layer", "1", "--out", str(tmp_path / "p.html")],
        capture_output=True, text=True, timeout=300, env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 layers" in embedded_graph(tmp_path / "p.html")["title"]
    assert "backward steps" in done.stdout


def test_values_are_summarised_not_dumped(tmp_path):
    x = tt.randn(1000, 1000, requires_grad=True)  # a million values
    result = tt.explore((x * x).mean(), params={"x": x}, path=tmp_path / "big.html")
    bundle = (STATIC / "explorer.js").stat().st_size + (STATIC / "explorer.css").stat().st_size
    assert result.size_bytes - bundle < 10_000  # a few summaries, whatever the tensors' size
