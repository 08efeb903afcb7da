#!/usr/bin/env bash
# Set up, build, and run the showcase: train an RNN encoder-decoder with Bahdanau attention on the
# grammar task (English -> French-like, with adjective reordering and gender agreement), print its
# test accuracy and a few translations, write an HTML report with the attention heatmaps, and a page
# that walks through backprop through attention at every step of a new sentence.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
echo

run=runs/demo-grammar
rm -rf "$run"  # the demo's own previous run, if any
build/tapestry train --task grammar --attention bahdanau --epochs 4 --schedule step --step-size 3 \
  --lr 2e-3 --emb 64 --hidden 128 --valid-decode 300 --test-beam 5 --out "$run"

echo
echo "new sentences, translated by the trained model:"
sentences=(
  "the prime minister does not see the big red house"
  "my old horses visit the european economic area"
  "the happy french girl paints a beautiful white castle behind the post office"
)
mapfile -t outputs < <(printf '%s\n' "${sentences[@]}" | build/tapestry translate --model "$run")
for i in "${!sentences[@]}"; do
  printf '  %s\n  => %s\n' "${sentences[$i]}" "${outputs[$i]}"
done

echo
build/tapestry report --model "$run"

echo
echo "backprop through attention, step by step, on the second new sentence (a page to open):"
build/tapestry explain --model "$run" --source "${sentences[1]}" --step all --format html \
  --out "$run/explain.html"
echo "$run/explain.html"
