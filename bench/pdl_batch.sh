#!/usr/bin/env bash
# One device call for programmatic dependent launch (issue 5): the conformance of what PDL, the multi-block
# argmax and the sigmoid gate touch, the decode A/B (NINFER_PDL off/on on the same weights), the 27B decode
# profile, then the wider sm90 conformance suite with what time is left. Run from the repo root on the H200;
# kernels compiled ahead here with the device's NVRTC (13.0) and carried in the ignored .kc.
source bench/device_env.sh
if [ -d .kc ]; then mkdir -p $NINFER_KERNEL_CACHE && cp .kc/* $NINFER_KERNEL_CACHE/; fi
echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -c "import cuda.bindings, torch; print('cuda-bindings', cuda.bindings.__version__, 'torch', torch.__version__)"
STEPS="${*:-conf decode profile suite}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has conf; then echo "== conformance: PDL on == off (eager, graph), argmax, sigmoid_mul, models (sm90, sm89)"
  timeout ${CONF_S:-90} python -m pytest -q -x -p no:cacheprovider tests/gpu/test_ops.py tests/gpu/test_models.py \
    -k "(sm90 or sm89) and (pdl or argmax or sigmoid or graph or logits)" 2>&1 | tee $OUT/conf.txt | tail -6; fi
if has decode; then echo "== decode A/B, NINFER_PDL off/on"
  timeout ${DECODE_S:-170} python bench/decode.py --backend sm90 --shapes ${SHAPES:-qwen3.5-27b,llama3-8b} --ctx 512 \
    --pdl ${PDLS:-0,1,0,1} --new ${NEW:-128} --json $OUT/decode.json 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | cut -c1-220; fi
if has profile; then echo "== decode profile (27B shape, 8 layers, eager, NINFER_PDL=0: kernel times without early starts)"
  NINFER_PDL=0 timeout ${PROFILE_S:-45} python bench/decode_profile.py --shape qwen3.5-27b --layers 8 2>&1 \
    | grep -v "^ninfer: compiling" | tee $OUT/profile.txt | head -30; fi
if has suite; then echo "== conformance suite, ${SUITE_K:-sm90} (as far as time allows)"
  timeout ${SUITE_S:-60} python -m pytest -q -p no:cacheprovider tests/gpu -k "${SUITE_K:-sm90}" 2>&1 > $OUT/suite.txt
  echo "rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/suite.txt | tail -8; tail -c 400 $OUT/suite.txt; fi
