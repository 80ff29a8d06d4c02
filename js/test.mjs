// `npm test`: the completion and diagnostic helpers on small documents (the browser test covers the widget).
import assert from "node:assert/strict";
import { EditorState } from "@codemirror/state";
import { CompletionContext } from "@codemirror/autocomplete";
import { completer, toRanges, enclosing, stepIds } from "./src/editor.js";

const vocab = {
  top_keys: ["name", "description", "requires", "inputs", "body", "steps"],
  step_keys: { agent: ["id", "kind", "instructions", "next"], finish: ["id", "kind", "outcome"] },
  assignment_keys: ["group", "person", "initiator"], route_keys: ["to", "when"],
  check_keys: ["when", "verdict", "note"], field_keywords: ["type", "enum"],
  kinds: ["agent", "task", "approve", "wait_for", "finish"], types: ["string", "number"],
  profiles: ["parallel-1"], groups: ["g_finance"], agents: ["a_bot"],
};
const complete = completer(() => vocab);
function labels(doc) {
  const pos = doc.indexOf("|");
  const state = EditorState.create({ doc: doc.replace("|", "") });
  const result = complete(new CompletionContext(state, pos, true));
  return result ? result.options.map((o) => o.label) : [];
}
const base = "name: p\nsteps:\n  - id: draft\n    kind: agent\n";
assert.deepEqual(labels(base + "    next: |\n  - { id: done, kind: finish }\n"), ["draft", "done"]);
assert.deepEqual(labels(base + "    next: d|\n  - { id: done, kind: finish }\n"), ["draft", "done"]);
assert.deepEqual(labels(base + "    ins|\n"), vocab.step_keys.agent);
assert.deepEqual(labels(base + "  - id: x\n    kind: |\n"), vocab.kinds);
assert.deepEqual(labels("na|"), vocab.top_keys);
assert.deepEqual(labels(base + "    assign: { group: | }\n"), ["g_finance"]);
assert.deepEqual(labels(base + "    assign:\n      gr|\n"), vocab.assignment_keys);
assert.deepEqual(labels(base + "    after: [draft, |]\n"), ["draft"]);
assert.deepEqual(labels(base + "    output: { summary: | }\n"), vocab.types);
assert.deepEqual(labels("inputs:\n  subject: |\n"), vocab.types);
assert.deepEqual(labels(base + "    next:\n      - to: |\n"), ["draft"]);
assert.deepEqual(labels(base + "    next:\n      - |\n"), vocab.route_keys);
assert.deepEqual(labels(base + "    agents: [|]\n"), ["a_bot"]);
assert.deepEqual(labels(base + "  - { id: done, k| }\n"), vocab.step_keys.agent.concat(["outcome"]).filter((v, i, a) => a.indexOf(v) === i));
assert.deepEqual(labels(base + "    next: [{ to: draft }, { to: | }]\n"), ["draft"]);
assert.deepEqual(labels(base + "    next: [{ to: draft }, { w| }]\n"), vocab.route_keys);
assert.deepEqual(labels(base + "    check:\n      - { verdict: | }\n"), ["fail", "unsure"]);
assert.deepEqual(enclosing(EditorState.create({ doc: base + "    assign:\n      group: x\n" }).doc, 6, 6).path,
                 ["steps", "[]", "assign"]);
assert.deepEqual(stepIds(base + "  - { id: done, kind: finish }"), ["draft", "done"]);
const doc = EditorState.create({ doc: base + "    next: dne\n" }).doc;
const [range] = toRanges(doc, [{ line: 5, column: 11, severity: "error", message: "unknown step 'dne'" }]);
assert.equal(doc.sliceString(range.from, range.to), "dne");
console.log("ok");
