// Drives `brokered mcp` with the official MCP SDK client (@modelcontextprotocol/sdk) through a
// scenario, one JSON line of results per step on stdout.
//
//   node mcp-client.mjs SCENARIO.json SERVER-COMMAND [ARG...]
//   SCENARIO.json: [{"list": true}, {"ping": true}, {"call": "run", "args": {...}},
//                   {"sh": "test -e src"}, ...]
import fs from 'node:fs';
import {execSync} from 'node:child_process';
import {Client} from '@modelcontextprotocol/sdk/client/index.js';
import {StdioClientTransport} from '@modelcontextprotocol/sdk/client/stdio.js';

const [, , scenarioFile, command, ...args] = process.argv;
const steps = JSON.parse(fs.readFileSync(scenarioFile, 'utf8'));
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

// The SDK passes only a few variables by default; the server needs the test's XDG_* and HOME.
const transport = new StdioClientTransport({command, args, env: process.env, stderr: 'inherit'});
const client = new Client({name: 'brokered-test', version: '1.0.0'});
await client.connect(transport);
out({step: 'initialize', server: client.getServerVersion(),
  tools: client.getServerCapabilities()?.tools ? true : false});

for (const s of steps) {
  try {
    if (s.list) {
      const r = await client.listTools();
      out({step: 'list', tools: r.tools.map((t) => ({name: t.name, type: t.inputSchema.type,
        properties: Object.keys(t.inputSchema.properties || {}),
        required: t.inputSchema.required || []}))});
    } else if (s.ping) {
      out({step: 'ping', result: await client.ping()});
    } else if (s.sh) {
      let status = 0;
      try { execSync(s.sh, {stdio: 'ignore', shell: '/bin/sh'}); } catch (e) { status = e.status; }
      out({step: 'sh', sh: s.sh, status});
    } else if (s.call) {
      const r = await client.callTool({name: s.call, arguments: s.args || {}}, undefined,
        {timeout: 300000});
      out({step: 'call', call: s.call, isError: r.isError === true,
        structured: r.structuredContent ?? null, text: r.content?.[0]?.text ?? null});
    }
  } catch (e) {
    out({step: s.call ? 'call' : 'error', call: s.call, error: {code: e.code ?? null,
      message: String(e.message)}});
  }
}
await client.close();
