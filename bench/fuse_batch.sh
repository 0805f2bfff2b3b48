#!/usr/bin/env bash
# One device call for the one-pass RMSNorm kernels (issue 5): their conformance (sm90, sm89), the decode A/B
# (--norm 2,1: the former two-pass kernels and the new ones, one process, same weights), the 27B decode profile,
# then the model-level tests with what time is left. Run from the repo root on the H200; kernels compiled ahead
# here with the device's NVRTC (13.0), both variants, carried in the ignored .kc.
source bench/device_env.sh
if [ -d .kc ]; then mkdir -p $NINFER_KERNEL_CACHE && cp .kc/* $NINFER_KERNEL_CACHE/; fi
echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== conformance: rms_norm, add_rms_norm (sm90, sm89)"
timeout ${CONF_S:-35} python -m pytest -q -x -p no:cacheprovider tests/gpu/test_fused.py tests/gpu/test_ops.py \
  -k "(sm90 or sm89) and rms_norm" 2>&1 | tee $OUT/conf.txt | tail -4
echo "== decode A/B, --norm ${NORMS:-2,1}"
timeout ${DECODE_S:-60} python bench/decode.py --backend sm90 --shapes ${SHAPES:-qwen3.5-27b,llama3-8b} --ctx 512 \
  --norm ${NORMS:-2,1} --new ${NEW:-128} --json $OUT/decode.json 2>&1 | tee $OUT/decode.txt \
  | grep -E "RESULT|FAILED|copy bandwidth|Error" | cut -c1-230
echo "== decode profile (27B shape, 8 layers, eager, NINFER_PDL=0)"
NINFER_PDL=0 timeout ${PROFILE_S:-20} python bench/decode_profile.py --shape qwen3.5-27b --layers 8 2>&1 \
  | grep -v "^ninfer: compiling" | tee $OUT/profile.txt | head -${PROFILE_LINES:-24}
echo "== models (sm90, sm89) with what time is left"
timeout ${MODELS_S:-30} python -m pytest -q -p no:cacheprovider tests/gpu/test_models.py -k "sm90 or sm89" 2>&1 \
  > $OUT/models.txt; echo "rc $?"; tail -c 300 $OUT/models.txt
