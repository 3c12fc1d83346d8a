// A scripted model endpoint on 127.0.0.1 for driving a real agent CLI offline: the Anthropic
// Messages API (Claude Code) and the Gemini API (Gemini CLI), streamed as Server-Sent Events. Each
// main-loop request is answered from a script of tool calls, chosen by how many tool results the
// conversation already holds; requests without tools (titles, summaries, routing) get a short
// text. Prints "PORT <n>" when listening, logs requests to $MODEL_LOG (one JSON line each).
//
//   node model-endpoint.mjs SCRIPT.json
//   SCRIPT.json: [{"name": "Bash", "input": {"command": "rm -rf src"}}, {"name": "Write", ...}]
import http from 'node:http';
import fs from 'node:fs';

const script = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const logFile = process.env.MODEL_LOG;

function sse(res, events) {
  res.writeHead(200, {'content-type': 'text/event-stream', 'cache-control': 'no-cache'});
  for (const [type, data] of events)
    res.write(`event: ${type}\ndata: ${JSON.stringify({type, ...data})}\n\n`);
  res.end();
}

function message(id, blocks, stopReason) {
  const ev = [['message_start', {message: {id, type: 'message', role: 'assistant',
    model: 'scripted', content: [], stop_reason: null, stop_sequence: null,
    usage: {input_tokens: 1, output_tokens: 1}}}]];
  blocks.forEach((b, index) => {
    if (b.type === 'text') {
      ev.push(['content_block_start', {index, content_block: {type: 'text', text: ''}}]);
      ev.push(['content_block_delta', {index, delta: {type: 'text_delta', text: b.text}}]);
    } else {
      ev.push(['content_block_start', {index, content_block: {type: 'tool_use', id: b.id,
        name: b.name, input: {}}}]);
      ev.push(['content_block_delta', {index, delta: {type: 'input_json_delta',
        partial_json: JSON.stringify(b.input)}}]);
    }
    ev.push(['content_block_stop', {index}]);
  });
  ev.push(['message_delta', {delta: {stop_reason: stopReason, stop_sequence: null},
    usage: {output_tokens: 1}}]);
  ev.push(['message_stop', {}]);
  return ev;
}

// Gemini: generateContent / streamGenerateContent; tool calls are functionCall parts, results
// functionResponse parts.
function gemini(req, res, q) {
  const tools = (q.tools || []).flatMap((t) => t.functionDeclarations || []).map((f) => f.name);
  const results = (q.contents || []).flatMap((c) => c.parts || []).filter((p) => p.functionResponse);
  if (logFile)
    fs.appendFileSync(logFile, JSON.stringify({url: req.url, tools, results: results.length,
      errors: results.map((r) => r.functionResponse.response)
        .filter((r) => r && r.error).map((r) => r.error)}) + '\n');
  const step = script[results.length];
  const part = tools.length && step ? {functionCall: {name: step.name, args: step.input}}
    : {text: 'Done.'};
  const body = {candidates: [{content: {role: 'model', parts: [part]}, finishReason: 'STOP',
    index: 0}], usageMetadata: {promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2},
    modelVersion: 'scripted'};
  if (req.url.includes(':streamGenerateContent')) {
    res.writeHead(200, {'content-type': 'text/event-stream'});
    res.end(`data: ${JSON.stringify(body)}\n\n`);
  } else if (req.url.includes(':countTokens')) {
    res.writeHead(200, {'content-type': 'application/json'});
    res.end(JSON.stringify({totalTokens: 1}));
  } else {
    res.writeHead(200, {'content-type': 'application/json'});
    res.end(JSON.stringify(body));
  }
}

// OpenAI Responses API (Codex CLI): tool calls are function_call output items, results
// function_call_output input items. A script step's input is the call's arguments object.
function responses(req, res, q, n) {
  const tools = (q.tools || []).map((t) => t.name || t.type);
  const results = (q.input || []).filter((i) => i.type === 'function_call_output' ||
    i.type === 'custom_tool_call_output');
  if (logFile)
    fs.appendFileSync(logFile, JSON.stringify({url: req.url, tools, results: results.length,
      errors: [], outputs: results.map((r) => r.output)}) + '\n');
  const step = script[results.length];
  const id = `resp_${n}`;
  const item = tools.length && step
    ? (step.custom
      ? {type: 'custom_tool_call', id: `ctc_${n}`, call_id: `call_${n}`, name: step.name,
        input: step.input, status: 'completed'}
      : {type: 'function_call', id: `fc_${n}`, call_id: `call_${n}`, name: step.name,
        arguments: JSON.stringify(step.input), status: 'completed'})
    : {type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed',
      content: [{type: 'output_text', text: 'Done.', annotations: []}]};
  const usage = {input_tokens: 1, input_tokens_details: {cached_tokens: 0}, output_tokens: 1,
    output_tokens_details: {reasoning_tokens: 0}, total_tokens: 2};
  const events = [
    ['response.created', {response: {id, object: 'response', status: 'in_progress', output: []}}],
    ['response.output_item.added', {output_index: 0, item}],
    ['response.output_item.done', {output_index: 0, item}],
    ['response.completed', {response: {id, object: 'response', status: 'completed',
      output: [item], usage}}],
  ];
  res.writeHead(200, {'content-type': 'text/event-stream'});
  for (const [type, data] of events)
    res.write(`event: ${type}\ndata: ${JSON.stringify({type, ...data})}\n\n`);
  res.end();
}

let n = 0;
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    n++;
    let q = {};
    try { q = JSON.parse(body || '{}'); } catch { /* not JSON: answered with text */ }
    if (req.url.includes('/responses')) {
      responses(req, res, q, n);
      return;
    }
    if (req.url.includes('/models/')) {
      gemini(req, res, q);
      return;
    }
    const tools = (q.tools || []).map((t) => t.name);
    const results = (q.messages || []).flatMap((m) => Array.isArray(m.content) ? m.content : [])
      .filter((c) => c.type === 'tool_result');
    if (logFile)
      fs.appendFileSync(logFile, JSON.stringify({url: req.url, tools, results: results.length,
        errors: results.filter((r) => r.is_error).map((r) => r.content)}) + '\n');
    if (!req.url.startsWith('/v1/messages') || req.url.startsWith('/v1/messages/count_tokens')) {
      res.writeHead(200, {'content-type': 'application/json'});
      res.end(JSON.stringify({input_tokens: 1}));
      return;
    }
    const step = script[results.length];
    if (tools.length && step)
      sse(res, message(`msg_${n}`, [{type: 'tool_use', id: `toolu_${n}`, ...step}], 'tool_use'));
    else
      sse(res, message(`msg_${n}`, [{type: 'text', text: 'Done.'}], 'end_turn'));
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});
