// One BullMQ Worker (default options, --concurrency) on queue "q" of the
// redis-server at 127.0.0.1:--port, run as a child process by bench.js.
// Prints "READY" once connected, then "id due_ms start_ms" per job run.
const { Worker } = require('bullmq');

const args = Object.fromEntries(process.argv.slice(2).map(a => a.replace(/^--/, '').split('=')));
const port = Number(args.port);
if (!port) { console.error('--port is required'); process.exit(2); }
const concurrency = Number(args.concurrency || 10);

// The processor only records its start time; lines are flushed every 5 ms so
// that writing to the pipe never delays a job's start.
let pending = [];
const worker = new Worker('q', async job => {
  const start = Date.now();
  pending.push(`${job.data.i} ${job.data.d} ${start}\n`);
}, { connection: { host: '127.0.0.1', port }, concurrency });
worker.on('error', e => process.stderr.write(`worker error: ${e}\n`));

const flush = () => {
  if (pending.length) {
    const lines = pending.join('');
    pending = [];
    process.stdout.write(lines);
  }
};
setInterval(flush, 5);
worker.waitUntilReady().then(() => process.stdout.write('READY\n'));
// close() waits for running jobs, so the last flush holds every job this worker ran.
process.on('SIGTERM', async () => { await worker.close(); flush(); process.exit(0); });
