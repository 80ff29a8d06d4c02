"""Author panel: validation on every edit, graph preview, schemas, publish with a diff."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET

from studio import Engine
from studio.panels import AuthorPanel
from studio.panels.author import NEW_TEMPLATE


def test_opens_the_latest_published_version_and_previews_it(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    name, version = panel.choose.value
    assert panel.editor.value == engine.source(name, version)
    assert 'class="ps-badge ok">valid' in panel.status.value
    svg = ET.fromstring(panel.preview.value)  # the step graph, well-formed
    steps = {g.get("data-step") for g in svg.iter("{http://www.w3.org/2000/svg}g") if g.get("data-step")}
    assert steps == {s.id for s in engine.process(name).steps}
    assert not panel.publish_button.disabled


def test_every_edit_is_validated_with_line_and_column(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    panel.load_version("supplier-onboarding")
    good_svg = panel.preview.value
    broken = panel.editor.value.replace("next: done", "next: dne")
    panel.editor.value = broken  # observing `value`: no button needed
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "next: dne" in text)
    assert f"<b>{line}:" in panel.diagnostics.value
    assert "unknown step &#x27;dne&#x27; (did you mean &#x27;done&#x27;?)" in panel.diagnostics.value
    assert "1 error" in panel.status.value
    assert panel.publish_button.disabled
    assert panel.preview.value == good_svg  # the last valid picture stays
    assert panel.right.buttons.options[0][0] == "Step graph (last valid)"
    panel.editor.value = "name: x\nsteps: [ {id: a, kind: agent"  # YAML syntax error
    assert "error" in panel.diagnostics.value and panel.publish_button.disabled
    panel.editor.value = broken.replace("next: dne", "next: done")
    assert panel.diagnostics.value == "" and not panel.publish_button.disabled
    assert panel.right.buttons.options[0][0] == "Step graph"


def test_lint_warnings_are_listed(engine: Engine) -> None:
    panel = AuthorPanel(engine, text=NEW_TEMPLATE + "  - { id: orphan, kind: finish }\n")
    assert "warning" in panel.diagnostics.value and "unreachable" in panel.diagnostics.value
    assert re.search(r"<b>\d+:\d+</b> warning", panel.diagnostics.value)
    assert "1 warning" in panel.status.value and not panel.publish_button.disabled


def test_schemas_of_inputs_and_outputs(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    panel.load_version("supplier-onboarding")
    blocks = [json.loads(html.unescape(b)) for b in re.findall(r'<pre class="ps-json">(.*?)</pre>',
                                                                  panel.schemas.value, re.S)]
    inputs, output = blocks
    assert inputs["$id"].endswith("/supplier-onboarding/inputs.json")
    assert inputs["required"] == ["vendorName", "amount"] and inputs["additionalProperties"] is False
    assert output["$id"].endswith("/steps/check_vendor/output.json")
    assert output["properties"]["cleared"] == {"type": "boolean"}


def test_publish_makes_a_new_version_and_shows_the_diff(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    panel.load_version("supplier-onboarding")
    before = panel.editor.value
    panel.editor.value = before.replace("due: 2d", "due: 3d")
    panel.publish_button.click()
    assert engine.versions("supplier-onboarding") == [1, 2]
    assert engine.source("supplier-onboarding", 2) == panel.editor.value
    assert panel.last_publish == {"name": "supplier-onboarding", "version": 2, "published": True}
    assert "supplier-onboarding v2" in panel.publish_result.value
    diff = html.unescape(panel.diff.value)
    assert "--- supplier-onboarding v1" in diff and "+++ supplier-onboarding v2" in diff
    assert '<div class="del">-    due: 2d</div>' in diff and '<div class="add">+    due: 3d</div>' in diff
    assert panel.choose.value == ("supplier-onboarding", 2) and panel.right.selected == 2
    panel.publish_button.click()  # same text again: no new version
    assert engine.versions("supplier-onboarding") == [1, 2]
    assert "unchanged" in panel.publish_result.value
    panel.choose.value = ("supplier-onboarding", 1)
    panel.load_button.click()
    assert panel.editor.value == before


def test_publish_a_new_process_from_the_template(engine: Engine) -> None:
    panel = AuthorPanel(engine)
    panel.new_button.click()
    assert panel.editor.value == NEW_TEMPLATE and "valid" in panel.status.value
    panel.publish_button.click()
    assert engine.versions("my-process") == [1]
    assert "(nothing)" in html.unescape(panel.diff.value)
    assert ("my-process v1", ("my-process", 1)) in panel.choose.options
    panel.editor.value = "name: [oops"
    assert panel.publish() is None and engine.versions("my-process") == [1]
    assert "Fix the errors first" in panel.publish_result.value
