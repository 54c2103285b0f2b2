#!/usr/bin/env node
// loop.mjs -- the ratchet for one task, in Node.js (>= 18), with nothing but loopkit's
// published surface: the commands, their exit codes, and the attempt document's fields
// (`lk schema attempt`). No loopkit code is imported; any language can do the same.
//
//   node loop.mjs --contract loop.yaml --task-id fix-value --task "Make value good"
//   lk-plan next TASKS.md --contract loop.yaml > next.json && node loop.mjs --tasks TASKS.md next.json
//
// Each round: lk-decide --admit, then lk-invoke -> lk-diff -> lk-verify [-> lk-judge for a
// goal] -> lk-decide, each stage's document kept under .loopkit/runs/<task>/node-<run>/.
//   0 complete   git add -A && git commit (hooks run); a failed commit exits 40, nothing
//                marked; --tasks: marked done only after the commit landed.
//   10/11        the broken code stays; the decided document (its feedback) goes to the
//                next lk-invoke; the session is resumed; backoff_s is slept.
//   20/21/22     the whole tree is saved under refs/loopkit/<task>/<attempt>, then
//                git reset --hard, git clean -fd, RESET_PATHS (directories recreated
//                empty); a retrospective goes to the memory file; the task is parked.
//   30           saved under refs/loopkit/, the tree left as it is.
// Exit codes: those of loop.sh (0, 20, 21, 22, 30, 40 commit failed, 41 runaway, 4 setup).

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const EXIT = { NO_COMMIT: 40, RUNAWAY: 41, SETUP: 4 };

class Stop extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

const log = (msg) => process.stderr.write(`${new Date().toISOString().slice(0, 19)}Z loop.mjs: ${msg}\n`);

function run(cmd, args, { input, ok = [0], env } = {}) {
  const done = spawnSync(cmd, args, {
    input,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "inherit"],
    maxBuffer: 512 * 1024 * 1024,
    env: env ?? process.env,
  });
  if (done.error) throw new Stop(EXIT.SETUP, `${cmd}: ${done.error.message}`);
  if (!ok.includes(done.status)) {
    throw new Stop(done.status ?? 70, `${cmd} ${args.join(" ")} exited ${done.status}`);
  }
  return { code: done.status, stdout: done.stdout };
}

function git(args, opts = {}) {
  const done = spawnSync("git", args, { encoding: "utf8", env: opts.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
  if (done.status !== 0) {
    if (opts.quiet) return null;
    throw new Stop(opts.code ?? EXIT.NO_COMMIT, `git ${args.join(" ")}: ${done.stderr.trim()}`);
  }
  return done.stdout.trim();
}

function parseArgs(argv) {
  const o = { resetPaths: (process.env.RESET_PATHS || "").split(/\s+/).filter(Boolean), maxRounds: 50 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Stop(2, `${a} needs a value`);
      return argv[++i];
    };
    if (a === "--contract") o.contract = path.resolve(next());
    else if (a === "--tasks") o.tasks = path.resolve(next());
    else if (a === "--task-id") o.taskId = next();
    else if (a === "--task") o.taskText = next();
    else if (a === "--goal") o.kind = "goal";
    else if (a === "--reset-path") o.resetPaths.push(next());
    else if (a === "--max-rounds") o.maxRounds = Number(next());
    else if (a.startsWith("-")) throw new Stop(2, `unknown option ${a}`);
    else o.start = path.resolve(a);
  }
  return o;
}

// --- the workspace: root, state folder, memory file, as every loopkit command sees them ---
// `lk workspace --json` creates the state folder and excludes it from git before anything
// is written there; the loop never re-derives what loopkit decides (schemas/workspace.json).
function workspace(contract, doc) {
  const args = ["workspace", "--json", ...(contract ? ["--contract", contract] : [])];
  const ws = JSON.parse(run("lk", args, { input: doc ? JSON.stringify(doc) : "" }).stdout);
  process.env.LOOPKIT_STATE_DIR = ws.state_dir;
  return ws;
}

function checkResetPaths(root, state, entries) {
  const dirs = new Set();
  for (const p of entries) {
    const clean = p.replace(/\/+$/, "").replace(/^\.\//, "");
    const parts = clean.split("/");
    if (!clean || path.isAbsolute(p) || parts.includes("..") || clean === "." || parts[0] === ".git" ||
        path.resolve(root, clean) === state || state.startsWith(path.resolve(root, clean) + path.sep)) {
      throw new Stop(EXIT.SETUP, `RESET_PATHS entry '${p}' is unsafe: use an ignored path inside the repository`);
    }
    const full0 = path.join(root, clean);
    if ((fs.existsSync(full0) && fs.lstatSync(full0).isSymbolicLink()) || !parentInside(root, full0)) {
      throw new Stop(EXIT.SETUP, `RESET_PATHS entry '${p}' is (or lies under) a symlink: name the real path inside the repository`);
    }
    if (git(["ls-files", "--", clean])) {
      throw new Stop(EXIT.SETUP, `RESET_PATHS entry '${p}' holds tracked files: name only ignored paths`);
    }
    const full = path.join(root, clean);
    if (p.endsWith("/") || (fs.existsSync(full) && fs.lstatSync(full).isDirectory())) dirs.add(clean);
  }
  return dirs;
}

// The nearest existing folder above `full`, symlinks resolved, lies inside the repository.
function parentInside(root, full) {
  let parent = path.dirname(full);
  while (!fs.existsSync(parent)) parent = path.dirname(parent);
  const real = fs.realpathSync(parent);
  const top = fs.realpathSync(root);
  return real === top || real.startsWith(top + path.sep);
}

function resetPaths(root, entries, dirs) {
  for (const p of entries) {
    const clean = p.replace(/\/+$/, "").replace(/^\.\//, "");
    const full = path.join(root, clean);
    if (!parentInside(root, full)) {
      log(`RESET_PATHS entry ${clean} now lies outside the repository (a symlink?): left alone`);
      continue;
    }
    fs.rmSync(full, { recursive: true, force: true });
    if (dirs.has(clean)) fs.mkdirSync(full, { recursive: true });
    log(`reset ${clean}`);
  }
}

// --- saving an attempt before any revert: a temporary index, the real one untouched -----
function saveAttempt(root, task, label, message) {
  const index = path.resolve(root, git(["rev-parse", "--git-path", `loopkit-save-${process.pid}.index`]));
  fs.rmSync(index, { force: true });
  const env = { ...process.env, GIT_INDEX_FILE: index };
  try {
    git(["read-tree", "HEAD"], { env });
    git(["add", "-A", "--", "."], { env });
    const tree = git(["write-tree"], { env });
    const commit = git(["commit-tree", tree, "-p", "HEAD", "-m", message]);
    const safe = (s) => String(s).replace(/[^A-Za-z0-9._-]/g, "-").replace(/^[.-]+/, "") || "x";
    let ref = `refs/loopkit/${safe(task)}/${safe(label)}`;
    for (let n = 2; git(["rev-parse", "-q", "--verify", ref], { quiet: true }) !== null; n++) {
      ref = `refs/loopkit/${safe(task)}/${safe(label)}-${n}`;
    }
    git(["update-ref", ref, commit, ""]);
    log(`saved the work tree as ${ref}`);
    return ref;
  } finally {
    fs.rmSync(index, { force: true });
  }
}

function commitPaths(message, paths) {
  const keep = paths.filter((p) => p && fs.existsSync(p) && git(["ls-files", "--others", "--cached", "--exclude-standard", "--", p], { quiet: true }));
  if (!keep.length) return;
  git(["add", "--", ...keep]);
  if (spawnSync("git", ["diff", "--cached", "--quiet", "--", ...keep]).status === 0) return;
  // Bookkeeping only (checklist, memory): no hooks, so a red check cannot block a park's record.
  git(["commit", "-q", "--no-verify", "-m", message, "--", ...keep]);
}

function memoryFile(root, doc, ws) {
  const m = process.env.MEMORY_FILE || doc?.contract?.memory;
  return m ? path.resolve(root, m) : ws.memory;
}

const oneLine = (s, n) => String(s ?? "").replace(/\s+/g, " ").trim().slice(0, n);

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const root = git(["rev-parse", "--show-toplevel"], { code: EXIT.SETUP });
  process.chdir(root);
  let start;
  if (o.taskId) start = { kind: "loopkit/attempt", version: 1, task: { id: o.taskId, text: o.taskText || o.taskId, kind: o.kind || "task" } };
  else if (o.start) start = JSON.parse(fs.readFileSync(o.start, "utf8"));
  else throw new Stop(2, "give --task-id ID --task TEXT, or a start document");
  const ws = workspace(o.contract, start);
  const state = ws.state_dir;
  const resetDirs = checkResetPaths(root, state, o.resetPaths);
  const task = start?.task?.id;
  if (!task) throw new Stop(3, "the start document names no task (.task.id)");
  if (git(["status", "--porcelain", "--untracked-files=all"])) {
    throw new Stop(EXIT.SETUP, "the work tree has uncommitted changes; commit them first");
  }
  const base = git(["rev-parse", "HEAD"], { code: EXIT.SETUP });
  const runDir = path.join(state, "runs", task.replace(/[^A-Za-z0-9._-]/g, "-"), `node-${new Date().toISOString().replace(/[-:.]/g, "")}-${process.pid}`);
  fs.mkdirSync(runDir, { recursive: true });
  const keep = (name, text) => fs.writeFileSync(path.join(runDir, name), text);
  keep("start.json", JSON.stringify(start) + "\n");
  const cargs = o.contract ? ["--contract", o.contract] : [];

  let input = JSON.stringify(start);
  let last = start;
  let label = "start";
  let session = null;

  const park = (code, outcome, doc) => {
    const ref = saveAttempt(root, task, label, `loopkit: ${task} attempt ${label} (${outcome}), saved by loop.mjs`);
    git(["reset", "-q", "--hard", base]);
    git(["clean", "-fdq"]);
    resetPaths(root, o.resetPaths, resetDirs);
    const memory = memoryFile(root, doc, ws);
    if (memory) {
      const d = doc?.decision ?? {};
      const lines = [
        "",
        `## ${new Date().toISOString().slice(0, 10)} parked: ${task} (${outcome})`,
        `- task: ${oneLine(doc?.task?.text, 200)}`,
        `- attempts: ${d.attempt ?? "?"}`,
        `- last failure: ${d.failure_class ?? outcome}${d.reason ? " — " + oneLine(d.reason, 300) : ""}`,
      ];
      if (d.feedback) lines.push(`- feedback: ${oneLine(d.feedback, 400)}`);
      if (doc?.judge?.feedback) lines.push(`- judge: ${oneLine(doc.judge.feedback, 400)}`);
      lines.push(`- the attempt is saved: git show ${ref}`, "");
      fs.mkdirSync(path.dirname(memory), { recursive: true });
      fs.appendFileSync(memory, lines.join("\n"));
    }
    if (o.tasks) {
      run("lk-plan", ["mark", o.tasks, "--task", task, "--status", "parked", "--reason", oneLine(`${outcome}: ${doc?.decision?.reason ?? ""}`, 200)]);
    }
    commitPaths(`loopkit: park ${task} (${outcome})`, [memory, o.tasks]);
    log(`parked ${task} (${outcome}); the attempt is saved as ${ref}`);
    return code;
  };

  const complete = (doc) => {
    const before = git(["rev-parse", "HEAD"]);
    const msg = `loopkit: ${task}: ${oneLine(doc.task?.text ?? task, 72)}\n\n${oneLine(doc.decision?.reason, 300)}\n\nLoopkit-Task: ${task}\nLoopkit-Attempt: ${doc.attempt_id ?? label}\n`;
    const added = spawnSync("git", ["add", "-A"], { stdio: "inherit" }).status;
    const committed = added === 0 ? spawnSync("git", ["commit", "-q", "--allow-empty", "-m", msg], { stdio: "inherit" }).status : 1;
    if (committed !== 0 || git(["rev-parse", "HEAD"]) === before) {
      const ref = saveAttempt(root, task, label, `loopkit: ${task} attempt ${label} (complete, commit failed)`);
      throw new Stop(EXIT.NO_COMMIT, `the commit of ${task} failed: the loop stops; the green tree is on disk and saved as ${ref}; the task is NOT marked done`);
    }
    log(`committed ${task} as ${git(["rev-parse", "--short", "HEAD"])}`);
    if (o.tasks) {
      run("lk-plan", ["mark", o.tasks, "--task", task, "--status", "done"]);
      commitPaths(`loopkit: mark ${task} done`, [o.tasks]);
    }
    return 0;
  };

  for (let round = 1; round <= o.maxRounds; round++) {
    const admit = run("lk-decide", ["--admit", ...cargs], { input, ok: [0, 20, 22, 30] });
    keep(`${round}-admit.json`, admit.stdout);
    // Refused: a spent budget (22) or a usage limit until its reset time (20).
    if (admit.code === 20) return park(20, "blocked", JSON.parse(admit.stdout));
    if (admit.code === 22) return park(22, "budget_exhausted", JSON.parse(admit.stdout));
    if (admit.code === 30) {
      saveAttempt(root, task, label, `loopkit: ${task} (cancelled)`);
      return 30;
    }
    const resume = session && process.env.LK_RESUME !== "never" ? ["--resume", session] : [];
    const invoked = run("lk-invoke", [...cargs, ...resume], { input: admit.stdout, ok: [0, 1] });
    keep(`${round}-invoke.json`, invoked.stdout);
    const diffed = run("lk-diff", [...cargs, "--base", base], { input: invoked.stdout, ok: [0, 1] });
    keep(`${round}-diff.json`, diffed.stdout);
    const verified = run("lk-verify", cargs, { input: diffed.stdout, ok: [0, 1] });
    keep(`${round}-verify.json`, verified.stdout);
    let evidence = verified.stdout;
    if (verified.code === 0 && JSON.parse(evidence).task?.kind === "goal") {
      evidence = run("lk-judge", cargs, { input: evidence, ok: [0, 1] }).stdout;
      keep(`${round}-judge.json`, evidence);
    }
    const decided = run("lk-decide", cargs, { input: evidence, ok: [0, 10, 11, 20, 21, 22, 30] });
    keep(`${round}-decide.json`, decided.stdout);
    last = JSON.parse(decided.stdout);
    const d = last.decision;
    label = String(d.attempt ?? round);
    log(`${task} attempt ${label}: ${d.outcome} -- ${oneLine(d.reason, 200)}`);
    switch (decided.code) {
      case 0:
        return complete(last);
      case 10:
      case 11:
        if (d.backoff_s > 0) {
          log(`waiting ${d.backoff_s}s before the next attempt`);
          await new Promise((r) => setTimeout(r, d.backoff_s * 1000));
        }
        session = last.run?.session_id ?? null;
        input = decided.stdout;
        break;
      case 30:
        saveAttempt(root, task, label, `loopkit: ${task} attempt ${label} (cancelled)`);
        return 30;
      default:
        return park(decided.code, d.outcome, last);
    }
  }
  saveAttempt(root, task, label, `loopkit: ${task} (runaway)`);
  throw new Stop(EXIT.RUNAWAY, `more than ${o.maxRounds} rounds`);
}

main().then(
  (code) => process.exit(code),
  (err) => {
    log(`error: ${err.message}`);
    process.exit(err instanceof Stop ? err.code : 70);
  },
);
