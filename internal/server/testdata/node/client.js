// Subscribes to kind-1 events on the relay at argv[2] with Node's ws
// client (which offers permessage-deflate by default), prints READY after
// EOSE, and once it has argv[3] events in all prints one JSON line:
// {"extensions": <negotiated>, "messages": [<raw message text>...]}.
const WebSocket = require('ws');
const url = process.argv[2];
const want = Number(process.argv[3]);
const ws = new WebSocket(url, { perMessageDeflate: true });
const messages = [];
let events = 0;
ws.on('open', () => ws.send(JSON.stringify(['REQ', 'node', { kinds: [1] }])));
ws.on('message', (data) => {
  const text = data.toString('utf8');
  messages.push(text);
  const m = JSON.parse(text);
  if (m[0] === 'EOSE') console.log('READY');
  if (m[0] === 'EVENT' && ++events === want) {
    console.log(JSON.stringify({ extensions: ws.extensions, messages }));
    ws.close();
  }
});
ws.on('error', (err) => { console.error(String(err)); process.exit(1); });
// A guard against hanging forever; the Go test's own waits (60 s) come first.
setTimeout(() => { console.error('timeout'); process.exit(2); }, 180000);
