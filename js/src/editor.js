// The Author panel's code editor: CodeMirror 6 inside an anywidget.
//
// Python owns validation (studio.definition.load_text); this side only edits, sends the text after the
// writer pauses (debounced, so a burst of typing is validated once), draws the diagnostics Python sends back
// and completes keys, step kinds, field types, step ids and directory ids from the `vocabulary` trait.
import { EditorState, Compartment } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching } from "@codemirror/language";
import { autocompletion, completionKeymap, closeBrackets } from "@codemirror/autocomplete";
import { lintGutter, setDiagnostics, lintKeymap } from "@codemirror/lint";
import { searchKeymap } from "@codemirror/search";
import { yaml } from "@codemirror/lang-yaml";

// -- diagnostics: Python's {line, column, severity, message} -> CodeMirror ranges ------------------------
const TOKEN = /^("[^"\n]*"?|'[^'\n]*'?|[^\s,[\]{}#:]+(?:[ \t]+[^\s,[\]{}#:]+)*)/;

export function toRanges(doc, diagnostics) {
  const out = [];
  for (const d of diagnostics || []) {
    const lineNo = Math.min(Math.max(d.line || 1, 1), doc.lines);
    const line = doc.line(lineNo);
    const col = Math.min(Math.max((d.column || 1) - 1, 0), line.length);
    const from = line.from + col;
    const match = TOKEN.exec(line.text.slice(col));
    // Underline the word the message is about; at least one character so the mark is visible.
    let to = from + (match ? match[0].length : 0);
    if (to === from) to = Math.min(line.to, from + 1);
    out.push({ from, to, severity: d.severity === "warning" ? "warning" : "error", message: d.message,
               source: d.path || undefined });
  }
  return out;
}

// -- completion -------------------------------------------------------------------------------------------
const KEY_LINE = /^(\s*)(-\s+)?([A-Za-z_][\w-]*)\s*:/;

function keyColumn(text) {
  const m = /^(\s*)(-\s+)?/.exec(text);
  return { dash: m[2] ? m[1].length : -1, key: m[0].length };
}

// The chain of enclosing keys above a position, "[]" for a list item: ["steps", "[]", "assign"].
export function enclosing(doc, lineNo, indent) {
  const path = [];
  let item = null;
  for (let n = lineNo - 1; n >= 1 && indent > 0; n--) {
    const text = doc.line(n).text;
    if (!text.trim() || text.trim().startsWith("#")) continue;
    const { dash, key } = keyColumn(text);
    if (dash >= 0 && dash < indent && key >= indent) {
      path.unshift("[]");
      if (item === null) item = n;
      indent = dash;
      continue;
    }
    if (key < indent) {
      const m = KEY_LINE.exec(text);
      if (m) path.unshift(m[3]);
      if (dash >= 0 && dash < key) { path.unshift("[]"); if (item === null) item = n; indent = dash; }
      else indent = key;
    }
  }
  return { path, item };
}

// The keys opened on this line before the cursor with `{`: `  - { id: x, assign: { gr` -> ["[]", "assign"].
function flowPath(before) {
  const path = [];
  const stack = [];
  const re = /([A-Za-z_][\w-]*)\s*:\s*([{[])|(-\s*)?([{[])|([}\]])/g;
  let m;
  while ((m = re.exec(before))) {
    if (m[5]) { stack.pop(); continue; }
    const open = m[2] || m[4];
    // A bare `{` or `[` is an item of a list already counted (the line's `- ` or an enclosing `[`).
    stack.push([m[1] || null, open]);
  }
  for (const [key, open] of stack) {
    if (key === null) continue;
    path.push(key);
    if (open === "[") path.push("[]");
  }
  return { path, open: stack.length ? stack[stack.length - 1][1] : null };
}

function stepKind(doc, itemLine, lineNo) {
  if (itemLine === null) return null;
  const first = doc.line(itemLine);
  const dash = keyColumn(first.text).dash;
  for (let n = itemLine; n <= doc.lines; n++) {
    const text = doc.line(n).text;
    if (n > itemLine && text.trim() && keyColumn(text).key <= dash + 1 && keyColumn(text).dash <= dash) break;
    const m = /(?:^|[\s{,])kind\s*:\s*["']?([a-z_]+)/.exec(text);
    if (m) return m[1];
    if (n > lineNo + 200) break;
  }
  return null;
}

export function stepIds(text) {
  const ids = new Set();
  const re = /(?:^|[\s{,])id\s*:\s*["']?([A-Za-z][\w-]*)/gm;
  let m;
  while ((m = re.exec(text))) ids.add(m[1]);
  return [...ids];
}

const STEP_REFS = new Set(["next", "reject", "to", "after", "all"]);

function valueOptions(vocab, key, path, docText) {
  const field = path.includes("inputs") || path.includes("output");
  if (key === "kind") return vocab.kinds.map((k) => ({ label: k, type: "enum", detail: "step kind" }));
  if (STEP_REFS.has(key)) return stepIds(docText).map((s) => ({ label: s, type: "variable", detail: "step" }));
  if (key === "group") return vocab.groups.map((g) => ({ label: g, type: "constant", detail: "group" }));
  if (key === "agents") return vocab.agents.map((a) => ({ label: a, type: "constant", detail: "agent" }));
  if (key === "assign" || key === "escalate_to") return [{ label: "initiator", type: "keyword" }];
  if (key === "verdict") return ["fail", "unsure"].map((v) => ({ label: v, type: "enum" }));
  if (key === "evidence") return ["file", "link"].map((v) => ({ label: v, type: "enum" }));
  if (key === "requires") return vocab.profiles.map((v) => ({ label: v, type: "enum", detail: "profile" }));
  if (key === "type" || field) return vocab.types.map((t) => ({ label: t, type: "type", detail: "field type" }));
  return [];
}

function keyOptions(vocab, path, kind) {
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  let keys = [];
  if (path.length === 0) keys = vocab.top_keys;
  else if (path.length === 2 && path[0] === "steps" && last === "[]") {
    keys = kind && vocab.step_keys[kind] ? vocab.step_keys[kind] : [...new Set(Object.values(vocab.step_keys).flat())];
  } else if (last === "assign" || last === "escalate_to") keys = vocab.assignment_keys;
  else if (last === "[]" && parent === "next") keys = vocab.route_keys;
  else if (last === "next") keys = ["all"];
  else if (last === "[]" && parent === "check") keys = vocab.check_keys;
  else if (path.length >= 2 && (parent === "inputs" || parent === "output")) keys = vocab.field_keywords;
  return keys.map((k) => ({ label: k, type: "property", apply: k + ": " }));
}

export function completer(getVocab) {
  return (context) => {
    const vocab = getVocab();
    if (!vocab) return null;
    const { state, pos } = context;
    const line = state.doc.lineAt(pos);
    const before = line.text.slice(0, pos - line.from);
    if (/#/.test(before.replace(/"[^"]*"|'[^']*'/g, ""))) return null; // in a comment
    const word = context.matchBefore(/[\w.-]*/);
    const from = word ? word.from : pos;
    const flow = flowPath(before);
    // A value: `key: wor`, `key: [a, wor` or `{ key: wor` (the last key before the cursor on this line).
    const value = /([A-Za-z_][\w-]*)\s*:\s*(?:\[\s*(?:[\w.-]+\s*,\s*)*)?[\w.-]*$/.exec(before);
    const isKey = /^\s*(?:-\s+)?[\w-]*$/.test(before) || /[{,]\s*[\w-]*$/.test(before) && flow.open === "{";
    const { path: outer, item } = enclosing(state.doc, line.number, keyColumn(line.text).key);
    const path = [...outer];
    if (/^\s*-\s+/.test(before) && (path[path.length - 1] !== "[]")) path.push("[]");
    path.push(...flow.path);
    let options = [];
    if (value && !isKey) {
      options = valueOptions(vocab, value[1], path, state.doc.toString());
    } else if (isKey) {
      const kindLine = /^\s*-\s+/.test(line.text) ? line.number : item;
      const kind = stepKind(state.doc, kindLine, line.number);
      options = keyOptions(vocab, path, kind);
    } else if (/^\s*-\s+[\w.-]*$/.test(before) || flow.open === "[") {
      // a list item value: `after:\n  - re` or `all: [a, re`
      const listKey = flow.open === "[" ? flow.path[flow.path.length - 2] : outer[outer.length - 1];
      options = valueOptions(vocab, listKey, path, state.doc.toString());
    }
    if (!options.length || (!context.explicit && from === pos && !/[:\[,{-]\s*$/.test(before))) return null;
    return { from, options, validFor: /^[\w.-]*$/ };
  };
}

// -- the widget -------------------------------------------------------------------------------------------
function render({ model, el }) {
  let vocab = model.get("vocabulary");
  let timer = null;
  let fromPython = false;
  const editable = new Compartment();

  const send = (text) => {
    if (text === model.get("value")) return;
    model.set("value", text);
    model.save_changes();
  };
  const flush = () => {
    if (timer !== null) { clearTimeout(timer); timer = null; send(view.state.doc.toString()); }
  };
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(() => { timer = null; send(view.state.doc.toString()); }, model.get("debounce_ms"));
  };

  const view = new EditorView({
    parent: el,
    state: EditorState.create({
      doc: model.get("value"),
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightActiveLine(), drawSelection(), history(),
        EditorView.lineWrapping,
        indentOnInput(), bracketMatching(), closeBrackets(), yaml(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        autocompletion({ override: [completer(() => vocab)], activateOnTyping: true }),
        lintGutter(),
        keymap.of([...completionKeymap, ...lintKeymap, ...searchKeymap, ...historyKeymap, ...defaultKeymap,
                   indentWithTab]),
        editable.of(EditorView.editable.of(!model.get("read_only"))),
        EditorState.tabSize.of(2),
        EditorView.updateListener.of((update) => {
          if (update.docChanged && !fromPython) schedule();
        }),
        EditorView.domEventHandlers({ blur: () => { flush(); return false; } }),
      ],
    }),
  });
  el.classList.add("ps-editor");
  el.style.setProperty("--ps-editor-height", model.get("height"));

  const showDiagnostics = () => {
    const diags = toRanges(view.state.doc, model.get("diagnostics"));
    view.dispatch(setDiagnostics(view.state, diags));
    el.dataset.diagnostics = String(diags.length);
  };
  const onValue = () => {
    const text = model.get("value");
    if (text === view.state.doc.toString()) return;
    clearTimeout(timer);
    timer = null;
    fromPython = true;
    try {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    } finally {
      fromPython = false;
    }
  };
  const onReveal = () => {
    const spot = model.get("reveal");
    if (!spot || !spot.line) return;
    const line = view.state.doc.line(Math.min(Math.max(spot.line, 1), view.state.doc.lines));
    const pos = line.from + Math.min(Math.max((spot.column || 1) - 1, 0), line.length);
    view.dispatch({ selection: { anchor: pos }, effects: EditorView.scrollIntoView(pos, { y: "center" }) });
    view.focus();
  };
  model.on("change:value", onValue);
  model.on("change:diagnostics", showDiagnostics);
  model.on("change:vocabulary", () => { vocab = model.get("vocabulary"); });
  model.on("change:reveal", onReveal);
  model.on("change:read_only", () => view.dispatch({
    effects: editable.reconfigure(EditorView.editable.of(!model.get("read_only"))) }));
  showDiagnostics();
  return () => { flush(); view.destroy(); };
}

export default { render };
