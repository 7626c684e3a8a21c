#!/usr/bin/env bash
# setup.sh CASE ARM ID PROJECT : build CASE as /tmp/blind/ID/PROJECT with an env.sh for ARM (with|without)
set -euo pipefail
case_=$1 arm=$2 id=$3 project=$4
root=/tmp/blind/$id
rm -rf "$root"; mkdir -p "$root/bin" "$root/tmp"
cd "$(dirname "$0")/../../.." && "${PYTHON:-.venv/bin/python}" -m benchmarks.agent.build "$case_" "$root/$project" >/dev/null
if [ "$arm" = with ]; then
  venv=${WITH_VENV:-/opt/bench/with}
  cat > "$root/bin/trainsleuth" <<W
#!/usr/bin/env bash
start=\$(date +%s.%N)
$venv/bin/trainsleuth "\$@"
rc=\$?
printf '%s\t%s\t%s\t%q\n' "\$(date +%H:%M:%S)" "\$rc" "\$(echo "\$(date +%s.%N) - \$start" | bc)" "\$*" >> $root/calls.log
exit \$rc
W
  chmod +x "$root/bin/trainsleuth"
else
  venv=${PLAIN_VENV:-/opt/bench/plain}
fi
cat > "$root/env.sh" <<E
export PATH=$root/bin:$venv/bin:/usr/local/bin:/usr/bin:/bin
export OMP_NUM_THREADS=1
export CHECK_PORT=$((29600 + RANDOM % 300))
cd $root/$project
E
echo "$root/$project"
