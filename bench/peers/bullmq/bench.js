// Measures BullMQ as a timer queue under the scenarios of timerq's
// `timerbench steady` and `timerbench burst`; the Node twin of
// ../asynq/main.go, with the same design and the same JSON keys.
//
//   node bench.js --port=PORT --scenario=steady|burst [--workers=4]
//     [--concurrency=10] [--rate=2000] [--duration=10] [--lead=3 (steady) / 5 (burst)]
//     [--tasks=100000] [--chunk=1000] [--inflight=4] [--lostAfter=60] [--dupWait=2]
//     [--dump=FILE]
//
// Expects an empty, private redis-server on 127.0.0.1:PORT. It starts
// --workers `node worker.js` processes (one BullMQ Worker each), waits until
// each is ready and 1 s more, then adds delayed jobs through one Queue. A
// job's data is its id and due time; each worker prints "id due_ms start_ms"
// per job run, read back here.
//
//   steady: --rate jobs/s come due for --duration s, each added --lead s
//           before it is due, by a producer that wakes every 2 ms. The
//           measured window runs from just before the first add until every
//           job has been seen running.
//   burst:  --tasks jobs due at one instant (a whole second, at least --lead s
//           ahead), added with addBulk in --chunk jobs, --inflight chunks at
//           a time. The window runs from the due instant until every job ran.
//
// Redis CPU is the change of INFO cpu used_cpu_user + used_cpu_sys over the
// window. Lateness is start − due in ms, signed. A job not seen --lostAfter s
// after the last due time is lost; runs seen up to --dupWait s after that
// count as duplicates. --dump writes "id due first_start runs" per job, for
// looking at where lateness comes from. Prints one JSON object.
const { Queue } = require('bullmq');
const IORedis = require('ioredis');
const { spawn } = require('child_process');
const readline = require('readline');
const fs = require('fs');
const path = require('path');

const defaults = {
  port: '', scenario: 'steady', workers: 4, concurrency: 10, rate: 2000, duration: 10, lead: '',
  tasks: 100000, chunk: 1000, inflight: 4, lostAfter: 60, dupWait: 2, dump: '',
};
const args = { ...defaults };
for (const a of process.argv.slice(2)) {
  const [k, v] = a.replace(/^--/, '').split('=');
  // Refuse unknown flags: a typo would otherwise silently run the full size.
  if (!(k in defaults)) { console.error(`unknown flag ${a}`); process.exit(2); }
  args[k] = v;
}
const port = Number(args.port);
if (!port) { console.error('--port is required'); process.exit(2); }
const { scenario, dump } = args;
if (scenario !== 'steady' && scenario !== 'burst') { console.error(`unknown --scenario ${scenario}`); process.exit(2); }
const rate = Number(args.rate);
const total = scenario === 'steady' ? rate * Number(args.duration) : Number(args.tasks);
if (!(total >= 1)) { console.error('no tasks: check --tasks, --rate and --duration'); process.exit(2); }
const workers = Number(args.workers);
const concurrency = Number(args.concurrency);
const lostAfterMs = Number(args.lostAfter) * 1000;
const dupWaitMs = Number(args.dupWait) * 1000;
const connection = { host: '127.0.0.1', port };

const sleep = ms => new Promise(r => setTimeout(r, ms));

// Redis's used_cpu_user + used_cpu_sys, in seconds.
async function redisCPUSeconds(rc) {
  const s = await rc.info('cpu');
  const field = k => Number((s.match(new RegExp(k + ':([0-9.]+)')) || [])[1]);
  return field('used_cpu_user') + field('used_cpu_sys');
}

// Nearest-rank p-th percentile of sorted values.
const percentile = (sorted, p) => sorted.length ? sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] : NaN;

// A delayed job due at `due` (ms). With timestamp = now and delay = due − now,
// BullMQ's delayed-set score is exactly the due millisecond.
const job = (id, due, now) => ({ name: 't', data: { i: id, d: due }, opts: { timestamp: now, delay: Math.max(0, due - now) } });

async function main() {
  const loadavg = fs.readFileSync('/proc/loadavg', 'utf8').trim();
  // Its own connection, used only for INFO cpu and the emptiness check.
  const rc = new IORedis(connection);
  if ((await rc.dbsize()) !== 0) { console.error('redis not empty'); process.exit(1); }

  // Per job: how often it ran and when it first started. Runs reported before
  // the counters exist (while the steady producer still adds) wait in
  // `beforeCounting` until then.
  let dues = [];
  let runs = null, firstStart = null;
  let seen = 0, latestStart = 0, earliestStart = Infinity;
  let beforeCounting = [];
  let onAllSeen = null;
  const handle = (id, start) => {
    if (runs === null) { beforeCounting.push([id, start]); return; }
    if (id >= total) return;
    runs[id]++;
    if (runs[id] === 1) {
      firstStart[id] = start;
      seen++;
      latestStart = Math.max(latestStart, start);
      earliestStart = Math.min(earliestStart, start);
    }
  };

  const children = [];
  let ready = 0, onAllReady;
  const allReady = new Promise(r => { onAllReady = r; });
  for (let w = 0; w < workers; w++) {
    const child = spawn(process.execPath, [path.join(__dirname, 'worker.js'), `--port=${port}`, `--concurrency=${concurrency}`],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    readline.createInterface({ input: child.stdout }).on('line', line => {
      if (line === 'READY') { if (++ready === workers) onAllReady(); return; }
      const f = line.split(' ');
      if (f.length !== 3) return;
      handle(Number(f[0]), Number(f[2]));
      if (onAllSeen && seen >= total) { const done = onAllSeen; onAllSeen = null; done(); }
    });
  }
  await allReady;
  await sleep(1000); // let the workers settle into their idle wait

  const queue = new Queue('q', { connection });
  await queue.waitUntilReady();
  const res = {
    peer: `bullmq ${require('bullmq/package.json').version}`, scenario, workers, concurrency,
    worker_defaults: 'drainDelay 5s, stalledInterval 30s, lockDuration 30s, removeOnComplete false (jobs kept)', loadavg,
  };
  let cpuStart, windowStart;

  if (scenario === 'steady') {
    const leadMs = Number(args.lead || 3) * 1000;
    // The 50 ms leaves time to read INFO cpu before the first add.
    const firstDue = Date.now() + 50 + leadMs;
    dues = Array.from({ length: total }, (_, i) => firstDue + Math.floor(i * 1000 / rate));
    res.lead_s = leadMs / 1000;
    res.enqueue_mode = 'queue.addBulk(jobs due by now, opts.delay = due - now, opts.timestamp = now), one addBulk per 2 ms wake (about 4 jobs), awaited';
    runs = new Int32Array(total); firstStart = new Float64Array(total);
    cpuStart = await redisCPUSeconds(rc); windowStart = Date.now();
    let next = 0, maxLag = 0;
    while (next < total) {
      const now = Date.now();
      const batch = [];
      while (next < total && dues[next] - leadMs <= now) { batch.push(job(next, dues[next], now)); next++; }
      if (batch.length) {
        await queue.addBulk(batch);
        // How far this batch finished behind the plan (due − lead) of its first job.
        maxLag = Math.max(maxLag, Date.now() - (dues[next - batch.length] - leadMs));
      }
      await sleep(2);
    }
    res.enqueue_s = (Date.now() - windowStart) / 1000;
    res.enqueue_per_s = total / res.enqueue_s;
    res.max_enqueue_lag_ms = maxLag;
  } else {
    const leadMs = Number(args.lead || 5) * 1000;
    const chunk = Number(args.chunk), inflight = Number(args.inflight);
    // A whole second, as in the asynq harness (asynq stores seconds).
    const due = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
    dues = new Array(total).fill(due);
    res.lead_s = (due - Date.now()) / 1000;
    res.enqueue_mode = `queue.addBulk in chunks of ${chunk}, up to ${inflight} chunks in flight, one Queue (one connection)`;
    runs = new Int32Array(total); firstStart = new Float64Array(total);
    const enqueueStart = Date.now();
    let next = 0;
    const addChunks = async () => {
      while (next < total) {
        const lo = next, hi = Math.min(total, next + chunk);
        next = hi;
        const now = Date.now();
        const batch = [];
        for (let i = lo; i < hi; i++) batch.push(job(i, due, now));
        await queue.addBulk(batch);
      }
    };
    await Promise.all(Array.from({ length: inflight }, addChunks));
    res.enqueue_s = (Date.now() - enqueueStart) / 1000;
    res.enqueue_per_s = total / res.enqueue_s;
    if (due - Date.now() < 200) res.note = `enqueue ended only ${due - Date.now()} ms before the due instant: raise --lead`;
    await sleep(due - Date.now());
    cpuStart = await redisCPUSeconds(rc); windowStart = Date.now();
  }
  res.tasks = total;
  for (const [id, start] of beforeCounting) handle(id, start);
  beforeCounting = [];
  const lastDue = dues[total - 1];

  if (seen < total) {
    await new Promise(resolve => {
      onAllSeen = resolve;
      setTimeout(resolve, Math.max(0, lastDue + lostAfterMs - Date.now()));
    });
    onAllSeen = null;
  }
  const cpuEnd = await redisCPUSeconds(rc); const windowEnd = Date.now();
  await sleep(dupWaitMs); // runs still arriving are counted as duplicates
  await Promise.all(children.map(c => new Promise(r => {
    c.on('exit', r);
    c.kill('SIGTERM');
    setTimeout(() => c.kill('SIGKILL'), 15000);
  })));
  await queue.close();
  rc.disconnect();

  res.window_redis_cpu_s = cpuEnd - cpuStart;
  res.window_wall_s = (windowEnd - windowStart) / 1000;
  res.redis_cpu_us_per_task = res.window_redis_cpu_s * 1e6 / total;
  res.redis_cores_used = res.window_redis_cpu_s / res.window_wall_s;
  let lost = 0, duplicates = 0, early = 0, earlyMax = 0;
  const lateness = [];
  for (let i = 0; i < total; i++) {
    if (runs[i] === 0) { lost++; continue; }
    if (runs[i] > 1) duplicates += runs[i] - 1;
    const late = firstStart[i] - dues[i];
    if (late < 0) { early++; earlyMax = Math.max(earlyMax, -late); }
    lateness.push(late);
  }
  lateness.sort((a, b) => a - b);
  Object.assign(res, {
    late_p50_ms: percentile(lateness, 0.5), late_p99_ms: percentile(lateness, 0.99), late_max_ms: lateness[lateness.length - 1],
    early, early_max_ms: earlyMax, duplicates, lost, clock_resolution_ms: 1,
  });
  if (scenario === 'burst' && seen > 0) {
    res.span_s = (latestStart - dues[0]) / 1000;
    res.fires_per_s = total / res.span_s;
    res.first_fire_after_due_ms = earliestStart - dues[0];
  }
  if (dump) {
    fs.writeFileSync(dump, Array.from({ length: total }, (_, i) => `${i} ${dues[i]} ${firstStart[i]} ${runs[i]}`).join('\n') + '\n');
  }
  console.log(JSON.stringify(res));
  process.exit(0);
}

main().catch(e => { console.error(e); process.exit(1); });
