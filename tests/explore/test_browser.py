"""The explorer page in a real browser (headless Chromium): folding, the inspector's numbers
against the tensors, the backward steps against the engine's own order, search, and scale.
Each test saves a screenshot (see the `screenshots` fixture for where)."""

import inspect
import time

import numpy as np
import pytest

import tinytensor as tt

from .models import module_names, tiny_gpt

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# ---- helpers ---------------------------------------------------------------------------------


def open_page(browser, path):
    browser.get(path.resolve().as_uri())
    for _ in range(100):
        if browser.execute_script("return Boolean(window.ttExplorer)"):
            break
        time.sleep(0.05)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def css(browser, selector):
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, selector)


def click(browser, selector):
    """A real mouse click (the page pans on drag, so Selenium clicks where a user would)."""
    from selenium.webdriver.common.action_chains import ActionChains

    (element,) = css(browser, selector)
    ActionChains(browser).move_to_element(element).click().perform()


def press(browser, key, times=1):
    from selenium.webdriver.common.action_chains import ActionChains

    for _ in range(times):
        ActionChains(browser).send_keys(key).perform()


def stat(browser, part, name):
    (cell,) = css(browser, f'#inspector [data-part="{part}"] [data-stat="{name}"]')
    return float(cell.text)


def assert_inspector_shows(browser, part, array, what):
    """The inspector's min/max/mean/std (5 significant digits) against the array itself."""
    a = np.asarray(array, dtype=np.float64).reshape(-1)
    expected = {"min": a.min(), "max": a.max(), "mean": a.mean(), "std": a.std()}
    for name, value in expected.items():
        shown = stat(browser, part, name)
        assert shown == pytest.approx(value, rel=2e-4, abs=1e-8), (what, part, name, shown, value)


def module_index(result, name):
    return next(i for i, m in enumerate(result.data["modules"]) if m["name"] == name)


def node_of(result, **fields):
    return next(n for n in result.data["nodes"] if all(n.get(k) == v for k, v in fields.items()))


@pytest.fixture(scope="module")
def gpt_page(tmp_path_factory):
    model, idx, targets, loss = tiny_gpt()
    path = tmp_path_factory.mktemp("explore") / "gpt.html"
    result = tt.explore(loss, params=model, path=path, title="tiny GPT")
    return model, idx, loss, result


# ---- tests -----------------------------------------------------------------------------------


def test_the_page_loads_nothing_from_outside(browser, gpt_page):
    *_, result = gpt_page
    open_page(browser, result.path)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    html = result.path.read_text(encoding="utf-8")
    assert "<script src" not in html and "<link" not in html


def test_opens_folded_to_top_level_modules_and_unfolds_one(browser, gpt_page, screenshots):
    model, _, _, result = gpt_page
    open_page(browser, result.path)
    blocks = module_index(result, "blocks")
    drawn_modules = {e.get_attribute("data-key") for e in css(browser, ".node.module")}
    top_level = {f"m{i}" for i, m in enumerate(result.data["modules"]) if m["parent"] is None}
    assert drawn_modules == top_level
    (label,) = css(browser, f'.node.module[data-key="m{blocks}"] text.label')
    assert label.text == "blocks · 2 × EncoderBlock"
    browser.save_screenshot(str(screenshots / "1-folded.png"))

    click(browser, f'.node[data-key="m{blocks}"] [data-toggle]')
    block0, block1 = module_index(result, "blocks.0"), module_index(result, "blocks.1")
    assert css(browser, f'.cluster[data-key="c{blocks}"]')
    assert {e.get_attribute("data-key") for e in css(browser, ".node.module")} >= {
        f"m{block0}",
        f"m{block1}",
    }
    click(browser, f'.node[data-key="m{block0}"] [data-toggle]')
    attn = module_index(result, "blocks.0.self_attn")
    assert css(browser, f'.node.module[data-key="m{attn}"]')  # the block's own submodules
    residual_adds = [
        n for n in result.data["nodes"] if n["kind"] == "op" and n["module"] == block0
    ]  # the two residual Adds run in the block's own forward
    for op in residual_adds:
        assert css(browser, f'.node.op[data-key="n{op["id"]}"]')[0].text == op["name"]
    assert len(model.blocks) == 2
    browser.save_screenshot(str(screenshots / "2-unfolded-block.png"))


def test_clicking_tensors_shows_their_values_and_gradients(browser, gpt_page, screenshots):
    model, idx, loss, result = gpt_page
    open_page(browser, result.path)
    out = node_of(result, role="output")
    click(browser, f'.node[data-key="n{out["id"]}"]')
    assert css(browser, '#inspector [data-field="title"]')[0].text == "output"
    assert stat(browser, "value", "mean") == pytest.approx(loss.item(), rel=1e-4)
    assert stat(browser, "grad", "mean") == 1.0  # backward's seed dL/dL

    first_add = next(
        n for n in result.data["nodes"] if n["kind"] == "op" and n["name"] == "Add"
    )  # wte(idx) + wpe(positions), drawn at the top level
    click(browser, f'.node[data-key="n{first_add["output"]}"]')
    ids = idx.numpy()
    embedded = model.wte.weight.numpy()[ids] + model.wpe.weight.numpy()[: ids.shape[1]]
    assert css(browser, '#inspector [data-field="shape"]')[0].text == "(2, 8, 16)"
    assert css(browser, '#inspector [data-field="title"]')[0].text == "(2, 8, 16) from Add"
    assert_inspector_shows(browser, "value", embedded, "wte(idx) + wpe")
    browser.save_screenshot(str(screenshots / "3-tensor-inspector.png"))


def test_clicking_an_op_shows_its_math_arguments_and_shapes(browser, gpt_page):
    *_, loss, result = gpt_page
    ce = loss._ctx  # the graph was freed by explore's backward; the class keeps the docstring
    open_page(browser, result.path)
    op = node_of(result, kind="op", name=type(ce).__name__)
    click(browser, f'.node[data-key="n{op["id"]}"]')
    assert css(browser, '#inspector [data-field="title"]')[0].text == "CrossEntropy"
    math = css(browser, '#inspector [data-field="math"]')[0].text
    assert math.splitlines()[0] == inspect.getdoc(type(ce)).splitlines()[0]
    text = css(browser, "#inspector")[0].text
    assert "reduction" in text and '"mean"' in text  # an argument the op kept
    logits, targets = (result.data["nodes"][i] for i in op["inputs"])
    assert f"(16, 50) from Reshape {logits['dtype']}" in text  # input 0: the (B*T, V) logits
    assert f"(16,) {targets['dtype']}" in text and "(no grad)" in text  # the target ids


def test_stepping_backward_follows_the_engines_order(browser, gpt_page, screenshots):
    _, _, _, result = gpt_page
    # The engine's order, from an independent run of the same model.
    model, _, _, loss = tiny_gpt()
    names = module_names(model)
    module_of, stack = {}, [loss._ctx]
    while stack:  # backward frees the nodes, so note each node's module first
        node = stack.pop()
        if id(node) not in module_of:
            module_of[id(node)] = names.get(id(node.module)) or ""
            stack.extend(x._ctx for x in node.inputs if x._ctx is not None)
    with tt.autograd.backward_trace() as trace:
        loss.backward()
    engine = [(type(s.node).__name__, module_of[id(s.node)]) for s in trace.steps]

    open_page(browser, result.path)
    click(browser, "#backward")
    press(browser, "\ue014", times=3)  # → three times
    label = css(browser, "#step-label")[0]
    assert label.text.startswith(f"3 / {len(engine)}: {engine[2][0]}")
    shown = result.data["nodes"][int(label.get_attribute("data-node"))]
    module = "" if shown["module"] is None else result.data["modules"][shown["module"]]["name"]
    assert (shown["name"], module) == engine[2]
    (current,) = css(browser, ".bw-current")
    assert current.get_attribute("data-key") == f"n{shown['id']}"  # drawn as itself: top level
    assert current.text == engine[2][0]
    done = {e.get_attribute("data-key") for e in css(browser, ".node.bw-done")}
    assert {f"n{result.data['steps'][i]['node']}" for i in range(2)} <= done
    # what the step sent to its inputs, against the engine's own arrays
    sent = [g for g in trace.steps[2].input_grads if g is not None]
    rows = css(browser, '#inspector table[data-part="sent"] tr:not(.name)')[1:]  # after the head
    norms = [float(r.find_elements("css selector", "td")[0].text) for r in rows]
    expected = [np.linalg.norm(np.asarray(g, dtype=np.float64)) for g in sent]
    assert norms == pytest.approx(expected, rel=2e-4)
    browser.save_screenshot(str(screenshots / "4-backward-step-3.png"))

    press(browser, "\ue012")  # ← goes back one step
    assert css(browser, "#step-label")[0].text.startswith(f"2 / {len(engine)}: {engine[1][0]}")


def test_search_reveals_a_parameter_inside_folded_modules(browser, gpt_page, screenshots):
    model, _, _, result = gpt_page
    open_page(browser, result.path)
    name = "blocks.1.ffn.fc_in.weight"
    (box,) = css(browser, "#search")
    box.send_keys(name)
    assert css(browser, "#results li")[0].text.startswith(name)
    box.send_keys("\ue007")  # Enter
    node = node_of(result, name=name)
    assert css(browser, f'.node.tensor[data-key="n{node["id"]}"]')  # unfolded down to it
    assert css(browser, '#inspector [data-field="title"]')[0].text == name
    p = dict(model.named_parameters())[name]
    assert_inspector_shows(browser, "value", p.numpy(), name)
    assert_inspector_shows(browser, "grad", p.grad.numpy(), name + ".grad")
    browser.save_screenshot(str(screenshots / "5-search.png"))


def test_a_48_layer_gpt_opens_folded_and_unfolds_one_block(browser, tmp_path, screenshots):
    tt.manual_seed(0)
    config = tt.models.GPTConfig(vocab_size=64, block_size=16, n_layer=48, n_head=2, n_embd=16)
    model = tt.models.GPT(config)
    idx = tt.randint(0, 64, (2, 8))
    loss = model(idx, idx).loss
    result = tt.explore(loss, params=model, path=tmp_path / "gpt48.html")
    print(f"\n48-layer GPT: {result}")
    assert result.num_ops > 900 and result.num_steps > 900  # 19 ops per block, and the head
    started = time.perf_counter()
    open_page(browser, result.path)
    print(f"opened and drawn in {time.perf_counter() - started:.2f} s")
    assert len(css(browser, ".node")) < 30  # folded: the top-level modules and a few ops
    blocks = module_index(result, "blocks")
    click(browser, f'.node[data-key="m{blocks}"] [data-toggle]')
    assert len(css(browser, ".node.module")) >= 48
    block = module_index(result, "blocks.30")
    seconds = browser.execute_script(  # the block may lie outside the window: click its toggle
        "const t0 = performance.now();"
        f"document.querySelector('.node[data-key=\"m{block}\"] [data-toggle]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}));"
        "return (performance.now() - t0) / 1000"
    )
    print(f"unfolding blocks.30 (with 47 folded blocks around it) took {seconds:.3f} s")
    assert css(browser, f'.cluster[data-key="c{block}"]')
    press(browser, "\ue010")  # End: the last backward step, the embedding's
    assert css(browser, "#step-label")[0].text.startswith(f"{result.num_steps} / ")
    browser.save_screenshot(str(screenshots / "6-gpt48-one-block.png"))


def test_search_by_op_name_marks_every_match(browser, gpt_page):
    *_, result = gpt_page
    open_page(browser, result.path)
    (box,) = css(browser, "#search")
    box.send_keys("Gelu")
    gelus = [n for n in result.data["nodes"] if n["kind"] == "op" and n["name"] == "Gelu"]
    listed = [li.text for li in css(browser, "#results li")]
    assert len(listed) == len(gelus) == 2 and all(t.startswith("Gelu in blocks.") for t in listed)
    # both sit inside the folded "blocks", which is marked as holding a match
    blocks = module_index(result, "blocks")
    assert css(browser, f'.node.module.search-hit[data-key="m{blocks}"]')


def test_jupyter_frame_shows_the_same_page(browser, gpt_page, tmp_path):
    *_, result = gpt_page
    notebook = tmp_path / "notebook.html"
    notebook.write_text(f"<!doctype html><body>{result._repr_html_()}</body>", encoding="utf-8")
    browser.get(notebook.as_uri())
    browser.switch_to.frame(css(browser, "iframe")[0])
    try:
        for _ in range(100):
            if css(browser, ".node"):
                break
            time.sleep(0.05)
        assert len(css(browser, ".node.module")) == sum(
            m["parent"] is None for m in result.data["modules"]
        )
    finally:
        browser.switch_to.default_content()


def test_a_step_shows_a_gradient_accumulating_into_a_tensor_used_twice(browser, gpt_page):
    *_, result = gpt_page
    steps = result.data["steps"]
    # the tied embedding: wte.weight feeds the Embedding and (transposed) the LM head
    wte = node_of(result, name="wte.weight")
    index = next(
        i for i, s in enumerate(steps) for t in s["sends"] if t["to"] == wte["id"] and t["k"] == 2
    )
    open_page(browser, result.path)
    click(browser, "#backward")
    browser.execute_script(
        "const s = document.getElementById('step-slider'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'))",
        index + 1,
    )
    assert css(browser, "#step-label")[0].text.startswith(f"{index + 1} / {len(steps)}")
    (acc,) = css(browser, '#inspector [data-field="accumulates"]')
    assert acc.text == "adds 2 of 2"


def test_nan_and_exploding_gradients_are_marked_on_the_graph(browser, tmp_path, screenshots):
    x = tt.tensor([1.0, -1.0, 4.0], requires_grad=True)
    with np.errstate(invalid="ignore"):
        result = tt.explore((tt.sqrt(x) * 1e6).sum(), params={"x": x}, path=tmp_path / "n.html")
    open_page(browser, result.path)
    x_node = node_of(result, name="x")
    (drawn,) = css(browser, f'.node.flag-nan[data-key="n{x_node["id"]}"]')
    assert "NaN" in drawn.find_element("css selector", ".badge").text
    assert css(browser, ".node.flag-exploding")
    click(browser, f'.node[data-key="n{x_node["id"]}"]')
    assert stat(browser, "grad", "nan") == 1  # d sqrt(x)/dx at x = -1
    browser.save_screenshot(str(screenshots / "7-nan-and-exploding.png"))
