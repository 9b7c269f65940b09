// A Node.js process profiled by the real @pyroscope/nodejs SDK, pushing to a Stackhouse.
//
// Usage: node app.js <server-url> <seconds>
// Burns CPU in stackhouseBusyLoop for <seconds>, then stops the profiler, which uploads
// what is still buffered.
'use strict';

const Pyroscope = require('@pyroscope/nodejs');

function stackhouseBusyLoop(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 10000; i++) x = (x * 31 + i) % 1000003;
  }
  return x;
}

async function main() {
  const [url, seconds] = [process.argv[2], Number(process.argv[3])];
  Pyroscope.init({
    serverAddress: url,
    appName: 'node-sdk-app',
    tags: { env: 'test', region: 'eu' },
    flushIntervalMs: 2000,
  });
  Pyroscope.start();
  const end = Date.now() + seconds * 1000;
  // Short slices, so the SDK's flush timer gets to run between them.
  while (Date.now() < end) {
    stackhouseBusyLoop(50);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Pyroscope.stop();
  console.log('stopped');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
