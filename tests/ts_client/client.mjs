// The official TypeScript MCP SDK as a client of `studio serve --transport http`.
//
// Usage: node client.mjs URL   with {"identity": "bearer token", ...} as the first stdin line, then one
// request per line: {"caller": "...", "tool": "...", "arguments": {...}}. Each caller gets its own MCP
// session with its own bearer token, opened on first use; tools/list is read once per session, so the
// SDK validates every structured result against the tool's advertised output schema (it throws if not).
// Answers one JSON line per request: {"envelope": ...} or {"error": "..."}; then
// {"tools": {"count": N, "bytes": B}} when stdin ends.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const sessions = new Map();
let tokens = null;
let listed = null;

async function session(caller) {
  if (!sessions.has(caller)) {
    const transport = new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { Authorization: `Bearer ${tokens[caller]}` } },
    });
    const client = new Client({ name: "studio-ts-test", version: "1.0.0" });
    await client.connect(transport);
    const tools = await client.listTools(); // caches the output-schema validators
    listed = {
      count: tools.tools.length,
      bytes: Buffer.byteLength(JSON.stringify(tools)),
      validated: tools.tools.filter((t) => client.getToolOutputValidator(t.name)).length,
    };
    sessions.set(caller, client);
  }
  return sessions.get(caller);
}

for await (const line of lines) {
  if (!line.trim()) continue;
  if (tokens === null) {
    tokens = JSON.parse(line);
    continue;
  }
  const { caller, tool, arguments: args } = JSON.parse(line);
  let answer;
  try {
    const result = await (await session(caller)).callTool({ name: tool, arguments: args });
    answer = { envelope: result.structuredContent ?? null, isError: result.isError ?? false };
  } catch (error) {
    answer = { error: String(error?.message ?? error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
process.stdout.write(JSON.stringify({ tools: listed }) + "\n");
for (const client of sessions.values()) await client.close();
