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
//   0 complete   the tree the checks ran on (verify.tree) is committed -- never a fresh
//                `git add -A` -- with git commit-tree + git update-ref (the old value as a
//                guard; no hook runs: the contract's criteria are the gate); a work tree
//                changed since the checks is saved under refs/loopkit/<task>/<attempt>-
//                after-verify, then brought to the commit. A failed commit exits 40,
//                nothing marked; --tasks: marked done only after the commit landed.
//   10/11        the broken code stays; the decided document (its feedback) goes to the
//                next lk-invoke; the session is resumed; backoff_s is slept.
//   20/21/22     the whole tree is saved under refs/loopkit/<task>/<attempt>, then the
//                index and work tree brought back to the base, untracked debris removed,
//                RESET_PATHS (directories recreated empty); a retrospective goes to the
//                memory file; the task is parked.
//   30           saved under refs/loopkit/, the tree left as it is.
// A commit or a park refuses (40, the tree saved, nothing reset) when the branch moved
// since the task began; one loop per work tree (the lock of lib.sh: a second loop, 4).
// Every git call runs without hooks, fsmonitor, signing, replace objects, or a filter
// driver of the repository's own config.
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

// --- git, with nothing of the worker's running inside it ---------------------------------
// The worker can plant hooks, an fsmonitor command, a filter driver ([filter "x"] clean =
// ... in .git/config, `* filter=x` in .git/info/attributes) or a replace ref that our own
// git calls would run or follow. Every call gets the settings loopkit's own git uses: no
// hooks, fsmonitor, untracked cache, replace objects or signing, and no filter driver the
// repository's own config defines (global and system ones, like git-lfs, keep working).
function neutralEnv(base) {
  const cfg = [["core.hooksPath", "/dev/null"], ["core.fsmonitor", "false"], ["core.untrackedCache", "false"], ["commit.gpgSign", "false"]];
  const done = spawnSync("git", ["config", "-z", "--show-scope", "--get-regexp", "^filter\\."], { encoding: "utf8" });
  const fields = (done.stdout || "").split("\0");
  const names = new Set();
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (["system", "global", "command"].includes(fields[i])) continue;
    const key = fields[i + 1].split("\n")[0];
    const first = key.indexOf("."), last = key.lastIndexOf(".");
    if (first < last) names.add(key.slice(first + 1, last));
  }
  for (const name of names) {
    for (const [part, value] of [["clean", ""], ["smudge", ""], ["process", ""], ["required", "false"]]) {
      cfg.push([`filter.${name}.${part}`, value]);
    }
  }
  const env = { ...base, GIT_NO_REPLACE_OBJECTS: "1" };
  let n = Number.parseInt(env.GIT_CONFIG_COUNT ?? "0", 10) || 0;
  for (const [key, value] of cfg) {
    env[`GIT_CONFIG_KEY_${n}`] = key;
    env[`GIT_CONFIG_VALUE_${n}`] = value;
    n++;
  }
  env.GIT_CONFIG_COUNT = String(n);
  return env;
}

function git(args, opts = {}) {
  const done = spawnSync("git", args, {
    encoding: "utf8",
    env: neutralEnv(opts.env ?? process.env),
    input: opts.input,
    stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    maxBuffer: 512 * 1024 * 1024,
  });
  if (done.status !== 0) {
    if (opts.quiet) return null;
    throw new Stop(opts.code ?? EXIT.NO_COMMIT, `git ${args.join(" ")}: ${done.stderr.trim()}`);
  }
  return opts.raw ? done.stdout : done.stdout.trim();
}

const short = (rev) => git(["rev-parse", "--short", rev], { quiet: true }) ?? rev;

// --- one loop per work tree: the lock lib.sh takes (a directory holding pid and start time)
function procStarted(pid) {
  // As lib.sh's lk_proc_started: on Linux the start time in clock ticks since boot (field
  // 22 of /proc/PID/stat), elsewhere ps's lstart.
  try {
    const line = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = line.slice(line.lastIndexOf(") ") + 2).trim().split(/\s+/);
    return fields.length >= 20 ? `ticks ${fields[19]}` : "";
  } catch {}
  const done = spawnSync("ps", ["-o", "lstart=", "-p", String(pid)], { encoding: "utf8" });
  return done.status === 0 ? done.stdout.trim() : "";
}

function alive(lock, pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  let started = "";
  try {
    started = fs.readFileSync(path.join(lock, "started"), "utf8").trim();
  } catch {}
  return !started || procStarted(pid) === started;
}

function takeLock(state) {
  const lock = path.join(state, "loop.lock");
  for (let waited = 0; ; ) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw new Stop(EXIT.SETUP, `cannot create ${lock}: ${err.message}`);
    }
    let pid = "";
    try {
      pid = fs.readFileSync(path.join(lock, "pid"), "utf8").trim();
    } catch {}
    if (!pid && waited < 20) {
      waited++;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
      continue;
    }
    if (pid && alive(lock, Number(pid))) {
      throw new Stop(EXIT.SETUP, `another loop (pid ${pid}) is running in this work tree: one loop per work tree -- two would save, revert and park each other's work. Wait for it to end, or stop it (kill ${pid})`);
    }
    const moved = `${lock}.stale-${process.pid}`;
    try {
      fs.renameSync(lock, moved);
    } catch {
      continue;
    }
    fs.rmSync(moved, { recursive: true, force: true });
    log(`took over the lock of a loop that is gone (pid ${pid || "unknown"}): ${lock}`);
    waited = 0;
  }
  fs.writeFileSync(path.join(lock, "started"), procStarted(process.pid) + "\n");
  fs.writeFileSync(path.join(lock, "pid.part"), `${process.pid}\n`);
  fs.renameSync(path.join(lock, "pid.part"), path.join(lock, "pid"));
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(130));
  process.on("exit", () => {
    try {
      if (fs.readFileSync(path.join(lock, "pid"), "utf8").trim() === String(process.pid)) {
        fs.rmSync(lock, { recursive: true, force: true });
      }
    } catch {}
  });
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

// --- trees: what is on disk, and bringing the disk to a tree --------------------------------
// The tree of the work tree (tracked and untracked files, ignored ones and .loopkit left
// out), built in a temporary index seeded from HEAD -- never from a copy of the real index,
// whose flags and stat data the worker can write.
// What the start's rules ignored (`startIgnored`) is left out too, even where the
// attempt's own .gitignore lets it in: a save never holds the user's .env.
function liveTree(root, startIgnored = []) {
  const index = path.resolve(root, git(["rev-parse", "--git-path", `loopkit-recipe-${process.pid}.index`]));
  fs.rmSync(index, { force: true });
  const env = { ...process.env, GIT_INDEX_FILE: index };
  try {
    git(["read-tree", "HEAD"], { env });
    git(["-c", "advice.addEmbeddedRepo=false", "add", "-A", "--", "."], { env });
    git(["rm", "-r", "--cached", "-q", "--ignore-unmatch", "--", ":(top,literal).loopkit"], { env });
    const drop = startIgnored.filter((p) => p !== ".loopkit/").map((p) => p.replace(/\/$/, ""));
    if (drop.length) {
      git(["rm", "-r", "--cached", "-q", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul"],
        { env: { ...env, GIT_LITERAL_PATHSPECS: "1" }, input: drop.map((p) => `${p}\0`).join("") });
    }
    return git(["write-tree"], { env });
  } finally {
    fs.rmSync(index, { force: true });
    fs.rmSync(`${index}.lock`, { force: true });
  }
}

// A path as a literal `git clean -e` pattern anchored at the root (null for a name
// holding a line break, which no pattern can name) -- as lib.sh's lk_keep_pattern.
function keepPattern(p) {
  if (p.includes("\n")) return null;
  let q = p.replace(/[\\*?[\]]/g, (c) => `\\${c}`);
  if (/^[#!]/.test(q)) q = `\\${q}`;
  if (q.endsWith(" ")) q = `${q.slice(0, -1)}\\ `;
  return `/${q}`;
}

// The work tree made to hold exactly `target`, the index `index` (default: target). The
// index is rebuilt from the tree (not trusted), untracked debris is removed, only files
// that differ are written back; ignored files and the state folder are left alone. What
// is debris is untracked under the attempt's rules, under target's (its .gitignore files
// are written back first) and under the start's (`startIgnored`, from `git status
// --ignored` as the task began): an attempt that emptied .gitignore, or left one that
// un-ignores a file and ignores itself, does not get the user's .env deleted.
function syncTo(target, index = target, startIgnored = []) {
  git(["read-tree", target]);
  git(["update-index", "-q", "--refresh"], { quiet: true });
  const rules = git(["diff-files", "--name-only", "-z", "--", ":(glob)**/.gitignore"], { raw: true });
  if (rules) git(["checkout-index", "-f", "-u", "-z", "--stdin"], { input: rules });
  const ignored = git(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"], { raw: true });
  const keep = [...ignored.split("\0").filter(Boolean), ...startIgnored].map(keepPattern);
  if (keep.includes(null)) log("an ignored file's name holds a line break: no untracked debris removed");
  else git(["clean", "-fdq", "-e", "/.loopkit/", ...keep.flatMap((k) => ["-e", k]), "--", "."]);
  const differ = git(["diff-files", "--name-only", "-z"], { raw: true });
  if (differ) git(["checkout-index", "-f", "-u", "-z", "--stdin"], { input: differ });
  if (index !== target) {
    git(["read-tree", index]);
    git(["update-index", "-q", "--refresh"], { quiet: true });
  }
}

// --- saving an attempt before any revert: the real index and the work tree untouched -----
// The saved commit's parent is where the attempt began, or HEAD once the branch moved on
// from there, so the commit the task began from stays reachable whatever the branch did.
function saveAttempt(root, task, label, message, base, startIgnored = []) {
  const tree = liveTree(root, startIgnored);
  const head = git(["rev-parse", "HEAD"]);
  const moved = head !== base && git(["merge-base", "--is-ancestor", base, head], { quiet: true }) !== null;
  const parent = moved ? head : base;
  const commit = git(["commit-tree", tree, "-p", parent, "-m", message]);
  const safe = (s) => String(s).replace(/[^A-Za-z0-9._-]/g, "-").replace(/^[.-]+/, "") || "x";
  let ref = `refs/loopkit/${safe(task)}/${safe(label)}`;
  for (let n = 2; git(["rev-parse", "-q", "--verify", ref], { quiet: true }) !== null; n++) {
    ref = `refs/loopkit/${safe(task)}/${safe(label)}-${n}`;
  }
  git(["update-ref", ref, commit, ""]);
  log(`saved the work tree as ${ref}`);
  return ref;
}

function commitPaths(message, paths) {
  const keep = paths.filter((p) => p && fs.existsSync(p) && git(["ls-files", "--others", "--cached", "--exclude-standard", "--", p], { quiet: true }));
  if (!keep.length) return;
  git(["add", "--", ...keep]);
  if (git(["diff", "--cached", "--quiet", "--no-ext-diff", "--", ...keep], { quiet: true }) !== null) return;
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
  takeLock(state);
  const resetDirs = checkResetPaths(root, state, o.resetPaths);
  const task = start?.task?.id;
  if (!task) throw new Stop(3, "the start document names no task (.task.id)");
  // One walk: is the tree dirty, and what do the start's rules ignore (kept at a park).
  const status = git(["status", "--porcelain", "-z", "--untracked-files=normal", "--ignored=matching"], { raw: true });
  const entries = status.split("\0").filter(Boolean);
  if (entries.some((e) => !e.startsWith("!! "))) {
    throw new Stop(EXIT.SETUP, "the work tree has uncommitted changes; commit them first");
  }
  const startIgnored = entries.map((e) => e.slice(3));
  const base = git(["rev-parse", "HEAD"], { code: EXIT.SETUP });
  const branch = git(["symbolic-ref", "-q", "HEAD"], { quiet: true }) ?? "";
  const baseTree = git(["rev-parse", `${base}^{tree}`], { code: EXIT.SETUP });
  const runDir = path.join(state, "runs", task.replace(/[^A-Za-z0-9._-]/g, "-"), `node-${new Date().toISOString().replace(/[-:.]/g, "")}-${process.pid}`);
  fs.mkdirSync(runDir, { recursive: true });
  const keep = (name, text) => fs.writeFileSync(path.join(runDir, name), text);
  keep("start.json", JSON.stringify(start) + "\n");
  const cargs = o.contract ? ["--contract", o.contract] : [];

  let input = JSON.stringify(start);
  let last = start;
  let label = "start";
  let session = null;

  const save = (outcome, name = label) =>
    saveAttempt(root, task, name, `loopkit: ${task} attempt ${label} (${outcome}), saved by loop.mjs`, base, startIgnored);

  // A commit or a revert refuses once the branch left the commit the task began from.
  const branchCheck = (what, ref) => {
    const head = git(["rev-parse", "-q", "--verify", "HEAD"], { quiet: true }) ?? "";
    const now = git(["symbolic-ref", "-q", "HEAD"], { quiet: true }) ?? "";
    if (head === base && now === branch) return;
    ref ??= save("branch moved");
    let back = "";
    // A branch rewound to an ancestor of the base is put back (that loses nothing).
    if (head && now === branch && git(["merge-base", "--is-ancestor", head, base], { quiet: true }) !== null) {
      back = git(["update-ref", "-m", `loopkit: ${task}: the branch back where the task began`, "HEAD", base, head], { quiet: true }) !== null
        ? ` It had been rewound to an ancestor: it is back at ${short(base)}, where the task began; the files and the index are as they were.`
        : ` It had been rewound to an ancestor: to put it back, git reset --soft ${base}.`;
    }
    throw new Stop(EXIT.NO_COMMIT, `${what} refused: the branch moved since ${task} began (${branch || "HEAD"} was at ${short(base)}, now ${now || "HEAD"} is at ${short(head)}: a commit made meanwhile, the worker's own commit or reset, or a checkout). Nothing is committed or reverted: the work tree is left as it is and saved as ${ref}; the task is NOT marked.${back}`);
  };

  const park = (code, outcome, doc) => {
    const ref = save(outcome);
    branchCheck(`the revert of ${task}`, ref);
    syncTo(baseTree, baseTree, startIgnored);
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

  // The tree the checks ran on (lk-decide completes only when it is the tree on disk),
  // committed on the base; the branch moved to it only from the base.
  const complete = (doc) => {
    const tree = doc.verify?.tree;
    if (!tree || git(["cat-file", "-t", tree], { quiet: true }) !== "tree") {
      const ref = save("complete, no verified tree");
      throw new Stop(EXIT.NO_COMMIT, `the decided document names no tree its checks ran on (verify.tree): nothing committed; the work tree is saved as ${ref}; the task is NOT marked done`);
    }
    branchCheck(`the commit of ${task}`);
    const msg = `loopkit: ${task}: ${oneLine(doc.task?.text ?? task, 72)}\n\n${oneLine(doc.decision?.reason, 300)}\n\nLoopkit-Task: ${task}\nLoopkit-Attempt: ${doc.attempt_id ?? label}\nLoopkit-Tree: ${tree}\n`;
    const commit = git(["commit-tree", tree, "-p", base, "-m", msg], { quiet: true });
    if (commit === null || git(["update-ref", "-m", `loopkit: ${task} complete`, "HEAD", commit, base], { quiet: true }) === null) {
      const ref = save("complete, commit failed");
      throw new Stop(EXIT.NO_COMMIT, `the commit of ${task} failed (no identity, or the branch moved meanwhile): nothing committed; the green tree is on disk and saved as ${ref}; the task is NOT marked done`);
    }
    log(`committed ${task} as ${short("HEAD")}: the tree its checks ran on`);
    if (liveTree(root, startIgnored) !== tree) {
      const ref = save("changed after verification", `${label}-after-verify`);
      log(`the work tree changed after the checks ran (a process the worker left running?): the commit holds the tree that was checked; what was on disk is saved as ${ref}`);
      syncTo("HEAD");
    } else {
      git(["read-tree", "HEAD"]);
      git(["update-index", "-q", "--refresh"], { quiet: true });
    }
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
      save("cancelled");
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
        save(d.outcome); // every attempt is kept before the next one starts on its tree
        if (d.backoff_s > 0) {
          log(`waiting ${d.backoff_s}s before the next attempt`);
          await new Promise((r) => setTimeout(r, d.backoff_s * 1000));
        }
        session = last.run?.session_id ?? null;
        input = decided.stdout;
        break;
      case 30:
        save("cancelled");
        return 30;
      default:
        return park(decided.code, d.outcome, last);
    }
  }
  save("runaway");
  throw new Stop(EXIT.RUNAWAY, `more than ${o.maxRounds} rounds`);
}

main().then(
  (code) => process.exit(code),
  (err) => {
    log(`error: ${err.message}`);
    process.exit(err instanceof Stop ? err.code : 70);
  },
);
