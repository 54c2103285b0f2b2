#!/usr/bin/env node
// loop.mjs -- the ratchet for one task, in Node.js (>= 18), with nothing but loopkit's
// published surface: the commands, their exit codes and their JSON documents (`lk schema
// attempt`, `lk schema task-step`). No loopkit code is imported, and no git: the lock,
// the saves, the commit and the park are `lk task` steps. Any language can do the same.
//
//   node loop.mjs --contract loop.yaml --task-id fix-value --task "Make value good"
//   lk-plan next TASKS.md --contract loop.yaml > next.json && node loop.mjs --tasks TASKS.md next.json
//
// lk task begin   the work tree's lock; whatever a stopped loop left is finished first
// lk attempt      one round: admission, the worker, diff, checks [, judge], the decision
//   0 complete    lk task land: exactly the tree the checks ran on is committed (40 when
//                 the branch moved: nothing committed), then the task marked done
//   10/11         lk task save; the decided document (its feedback) feeds the next round
//   20/21/22      lk task park: saved, reverted, RESET_PATHS reset, retrospective, parked
//   30            lk task cancel: saved, the tree left as it is
// lk task end     the lock released (a task still open is kept for the next begin)
// Exit codes: those of loop.sh (0, 20, 21, 22, 30, 40 not landed, 41 runaway, 4 setup).

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const log = (msg) => process.stderr.write(`${new Date().toISOString().slice(0, 19)}Z loop.mjs: ${msg}\n`);

// One loopkit command: its exit code and its one line of JSON (stderr goes to ours).
function lk(args, { input } = {}) {
  const done = spawnSync("lk", args, {
    input, encoding: "utf8", stdio: ["pipe", "pipe", "inherit"], maxBuffer: 64 * 1024 * 1024,
  });
  if (done.error) {
    log(`lk: ${done.error.message}`);
    process.exit(4);
  }
  const lines = (done.stdout || "").trim().split("\n").filter(Boolean);
  return { code: done.status ?? 70, doc: lines.length ? JSON.parse(lines.at(-1)) : null, text: done.stdout };
}

function must(args, opts) { // a step that must succeed: its code ends the loop otherwise
  const r = lk(args, opts);
  if (r.code !== 0) finish(r.code);
  return r.doc;
}

const opts = { contract: [], begin: [], maxRounds: 50, start: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const value = () => {
    if (i + 1 >= argv.length) { log(`${a} needs a value`); process.exit(2); }
    return argv[++i];
  };
  if (a === "--contract") opts.contract = ["--contract", path.resolve(value())];
  else if (["--tasks", "--task-id", "--task"].includes(a)) opts.begin.push(a, value());
  else if (a === "--reset-path") process.env.RESET_PATHS = `${process.env.RESET_PATHS || ""} ${value()}`;
  else if (a === "--goal" || a === "--allow-dirty") opts.begin.push(a);
  else if (a === "--max-rounds") opts.maxRounds = Number(value());
  else if (a === "-h" || a === "--help") {
    const text = fs.readFileSync(new URL(import.meta.url), "utf8").split("\n").slice(1);
    console.log(text.filter((l) => l.startsWith("//")).map((l) => l.slice(3)).join("\n"));
    process.exit(0);
  } else if (a.startsWith("-")) { log(`unknown option ${a}`); process.exit(2); }
  else opts.start = path.resolve(a);
}
if (!Number.isInteger(opts.maxRounds) || opts.maxRounds < 1) { log("--max-rounds needs a number"); process.exit(2); }

// The lock, recovery, where the task starts (its start document under run_dir).
const begin = lk(["task", "begin", ...(opts.start ? [opts.start] : []), ...opts.contract, ...opts.begin,
  "--owner", String(process.pid)]);
if (begin.code !== 0) process.exit(begin.code);
const task = begin.doc;
let ended = false;
function finish(code) {
  if (!ended) { ended = true; lk(["task", "end", "--owner", String(process.pid)]); }
  process.exit(code);
}
if (task.finished !== undefined) finish(task.finished); // the stopped loop's task, finished by begin
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => { log("interrupted: the rerun finishes the task"); finish(130); });

log(`task ${task.task}: starting at ${task.base.slice(0, 12)}; documents in ${task.run_dir}`);
let input = fs.readFileSync(task.start, "utf8");
let session = "";
for (let round = 1; round <= opts.maxRounds; round++) {
  const keep = path.join(task.run_dir, String(round));
  const args = ["attempt", "--keep", keep, ...opts.contract, "--base", task.diff_base];
  if (session && process.env.LK_RESUME !== "never") args.push("--resume", session);
  const r = lk(args, { input });
  const doc = r.doc;
  const file = [`${keep}-decide.json`, `${keep}-admit.json`].find((f) => fs.existsSync(f) && fs.statSync(f).size);
  if (![0, 10, 11, 20, 21, 22, 30].includes(r.code) || !doc || !file) {
    log(`lk attempt failed with exit ${r.code}; see ${task.run_dir}`);
    finish(r.code === 0 ? 70 : r.code);
  }
  const decision = doc.decision || {};
  const label = String(decision.attempt ?? round);
  log(`${task.task} attempt ${label}: ${decision.outcome} -- ${(decision.reason || "").split("\n")[0]}`);
  if (r.code === 0) {
    const landed = must(["task", "land", file, "--label", label, "--stat-cache"]);
    log(`committed ${task.task} as ${landed.commit.slice(0, 12)}`);
    finish(0);
  } else if (r.code === 10 || r.code === 11) {
    must(["task", "save", label, "--why", decision.outcome]);
    if (decision.backoff_s > 0) {
      log(`waiting ${decision.backoff_s}s before the next attempt (${decision.failure_class})`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, decision.backoff_s * 1000);
    }
    session = doc.run?.session_id || "";
    input = r.text;
  } else if (r.code === 30) {
    const saved = must(["task", "cancel", file, "--label", label]);
    log(`${task.task}: cancelled; the tree is left as it is (saved as ${saved.ref})`);
    finish(30);
  } else {
    const parked = must(["task", "park", file, "--label", label]);
    log(`parked ${task.task} (${decision.outcome}); the attempt is saved as ${parked.ref}`);
    finish(r.code);
  }
}
lk(["task", "save", "runaway", "--why", "runaway"]);
log(`${task.task}: more than ${opts.maxRounds} rounds; stopped`);
finish(41);
