#!/usr/bin/env bash
# Records docs/transcript.md: a phased run over two tasks with the real Claude Code CLI
# against loopkit's scripted model server (offline, no key), with lk-invoke's live
# progress. Every line of the session is what the commands printed; only the temporary
# folder is shown as ~ and the loopkit checkout as loopkit/.
#
#   PATH=$PWD/.venv/bin:$PWD/.cache/agents/node_modules/.bin:$PATH bash docs/transcript.sh > docs/transcript.md
#
# TRANSCRIPT_KEEP=1 keeps the temporary folder (its path is on stderr) to look around.
set -euo pipefail

for tool in lk lk-model-server claude git make python3 jq; do
    command -v "$tool" >/dev/null || { echo "transcript.sh: $tool is not on PATH" >&2; exit 4; }
done
checkout=$(cd "$(dirname "$0")/.." && pwd)
top=$(mktemp -d)
[ -z "${TRANSCRIPT_KEEP:-}" ] || echo "transcript.sh: working in $top" >&2
trap 'kill "${server_pid:-0}" 2>/dev/null || :; [ -n "${TRANSCRIPT_KEEP:-}" ] || rm -rf "$top"' EXIT
export HOME=$top GIT_CONFIG_NOSYSTEM=1 NO_COLOR=1 LOOPKIT_VALIDATE_OUTPUT=0
git config --global user.name "A Developer"
git config --global user.email dev@example.invalid
git config --global init.defaultBranch main

# The session: each command shown after "$ ", then everything it printed (stdout and
# stderr, in the order they came).
session=$top/session.txt
: >"$session"
show() {
    printf '$ %s\n' "$1" >>"$session"
    (cd "$top/calc" && eval "$1") >>"$session" 2>&1 || printf '[exit %s]\n' "$?" >>"$session"
}
note() { printf '\n# %s\n' "$*" >>"$session"; }

# --- the project, as its developer left it ---------------------------------------------
mkdir -p "$top/calc/calc" "$top/calc/tests"
cd "$top/calc"
printf 'def add(a, b):\n    return a + b\n' >calc/__init__.py
: >tests/__init__.py
cat >tests/test_add.py <<'EOF'
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
EOF
printf 'test:\n\tpython3 -m unittest -q\n' >Makefile
printf '__pycache__/\n' >.gitignore
git init -q && git add -A && git commit -qm "calc: add()"

# The model's side: one script per conversation (per task); the retry of the second task
# resumes its conversation, so its script goes on where the first attempt stopped.
cat >"$top/model.yaml" <<'EOF'
sessions:
  - - text: Let me read the module first.
      tools: [{name: Read, input: {file_path: "{{cwd}}/calc/__init__.py"}}]
    - delay: 1.5
      tools:
        - name: Edit
          input:
            file_path: "{{cwd}}/calc/__init__.py"
            old_string: "    return a + b\n"
            new_string: "    return a + b\n\n\ndef subtract(a, b):\n    return a - b\n"
    - delay: 1
      tools:
        - name: Write
          input:
            file_path: "{{cwd}}/tests/test_subtract.py"
            content: "import unittest\n\nfrom calc import subtract\n\n\nclass SubtractTest(unittest.TestCase):\n    def test_subtract(self):\n        self.assertEqual(subtract(5, 3), 2)\n"
    - delay: 1
      tools: [{name: Bash, input: {command: python3 -m unittest -q, description: Run the tests}}]
    - Added subtract() with its test; the tests pass.
  - - tools: [{name: Read, input: {file_path: "{{cwd}}/calc/__init__.py"}}]
    - delay: 1.5
      tools:
        - name: Edit
          input:
            file_path: "{{cwd}}/calc/__init__.py"
            old_string: "    return a - b\n"
            new_string: "    return a - b\n\n\ndef multiply(a, b):\n    return a ** b\n"
    - delay: 1
      tools:
        - name: Write
          input:
            file_path: "{{cwd}}/tests/test_multiply.py"
            content: "import unittest\n\nfrom calc import multiply\n\n\nclass MultiplyTest(unittest.TestCase):\n    def test_multiply(self):\n        self.assertEqual(multiply(2, 3), 6)\n"
    - Added multiply(). Done.
    - delay: 1
      tools:
        - name: Edit
          input:
            file_path: "{{cwd}}/calc/__init__.py"
            old_string: "    return a ** b\n"
            new_string: "    return a * b\n"
    - delay: 1
      tools: [{name: Bash, input: {command: python3 -m unittest -q, description: Run the tests}}]
    - "multiply() raised a to the power b; it multiplies now and the tests pass."
exhausted: end
EOF

note "loopkit in a small project: lk init, then two tasks for the agent."
show "git log --oneline"
show "lk init"
cat >TASKS.md <<'EOF'
# Tasks

- [ ] Add subtract(a, b) to calc, with a test {#subtract}
  budget: 20 lines / 2 files
  scope: calc/__init__.py, tests/test_subtract.py
  end
- [ ] Add multiply(a, b) to calc, with a test {#multiply}
  budget: 20 lines / 2 files
  scope: calc/__init__.py, tests/test_multiply.py
  depends: subtract
  end
EOF
python3 - <<'EOF'
import re
from pathlib import Path

path = Path("loop.yaml")
text = path.read_text()
text = text.replace(
    "objective: Describe, in one sentence, what the agent should achieve.",
    "objective: Grow calc one tested function at a time.",
)
text = re.sub(
    r"worker: .*?\n(?=\n)",
    "worker:\n  provider: claude\n  max_turns: 10\n  timeout: 300\n"
    '  allowed_tools: [Read, Edit, Write, "Bash(python3 -m unittest:*)"]\n',
    text,
    flags=re.S,
)
path.write_text(text)
EOF
note "TASKS.md written, loop.yaml's objective and worker edited:"
show "cat TASKS.md"
show "sed -n '/^criteria/,\$p' loop.yaml"
show "lk-plan check loop.yaml >/dev/null && lk-plan check TASKS.md >/dev/null && echo both check"
git add -A && git commit -qm "loopkit: contract and tasks"

note "The model is loopkit's scripted server (no network, no key); claude is the real CLI."
exec 3< <(cd "$top" && lk-model-server model.yaml --log requests.jsonl --env claude --home "$top")
read -r ready <&3
server_pid=$(jq -r .pid <<<"$ready")
while IFS='=' read -r name value; do export "$name=$value"; done < <(jq -r '.env | to_entries[] | "\(.key)=\(.value)"' <<<"$ready")
printf '$ lk-model-server model.yaml --log requests.jsonl --env claude --home ~ &\n%s\n' "$ready" >>"$session"
printf '$ export ANTHROPIC_BASE_URL=http://127.0.0.1:%s ANTHROPIC_API_KEY=loopkit-rehearsal ...   # the "env" above\n' "$(jq -r .port <<<"$ready")" >>"$session"

show "claude --version"
show "lk recipes --copy ~/recipes"
# shellcheck disable=SC2088  # shown as typed; eval expands it
show "~/recipes/phased-loop.sh"
show "git log --oneline"
show "grep '^- \\[' TASKS.md"
show "lk show multiply"

# The readable form: the temporary folder as ~, the checkout as loopkit/.
cat <<'EOF'
# A phased run, recorded

What a run of [`recipes/phased-loop.sh`](../recipes/phased-loop.sh) prints, recorded by
[`docs/transcript.sh`](transcript.sh) (run it to record your own): a small Python
project, `lk init`, two tasks, and the real Claude Code CLI as the worker, talking to
loopkit's scripted model server ([docs/model-server.md](model-server.md)) -- offline, no
key. The model's script adds `subtract()`; then a wrong `multiply()` that claims to be
done (the checks fail: retry, the session resumed with the feedback), then the fix.

The `lk-invoke: [  Ns]` lines are the live progress: one per tool call, with the file or
command and the elapsed time, and the tokens and cost the stream reported so far (the
cost is the CLI's price for a model it did not really talk to).

Every line after a `$ ` command is what it printed (stdout and stderr as they came);
the `#` lines are the script's notes. Two commands are shown as a person would type
them rather than run as shown: the script starts `lk-model-server` in the background
through a pipe to read its ready line (the JSON line below it is that line) and exports
the `env` it names. Nothing else is edited but the paths: the temporary folder is `~`.

```console
EOF
sed -e "s#$top#~#g" -e "s#$checkout#loopkit#g" "$session"
echo '```'
