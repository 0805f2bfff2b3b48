#!/usr/bin/env bash
# One device call for the figures issues 3, 6 and 7 ask for (run from the repo root on the H200).
# Steps to run as arguments (default all): quant hybrid verify qbench.
export PYTHONUNBUFFERED=1
# no pip there: the sources on PYTHONPATH, entry points through hand-written dist-info folders
SITE=/tmp/site; mkdir -p $SITE
for b in sm75 sm86 sm89 sm90; do d=$SITE/ninfer_$b-0.1.0.dist-info; mkdir -p $d
  printf 'Metadata-Version: 2.1\nName: ninfer-%s\nVersion: 0.1.0\n' $b > $d/METADATA
  printf '[ninfer]\n%s = ninfer_%s.plugin\n' $b $b > $d/entry_points.txt; done
d=$SITE/ninfer_drafters-0.1.0.dist-info; mkdir -p $d
printf 'Metadata-Version: 2.1\nName: ninfer-drafters\nVersion: 0.1.0\n' > $d/METADATA
printf '[ninfer]\ndrafters = ninfer_drafters\n' > $d/entry_points.txt
export PYTHONPATH=$SITE:$PWD/ninfer-core/src:$PWD/drafters/src:$(ls -d $PWD/backends/*/src | tr '\n' ':')
export NINFER_KERNEL_CACHE=/tmp/kc
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
STEPS="${*:-quant hybrid verify qbench}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has quant; then echo "== quant kernels (issue 7)"; timeout 60 python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py 2>&1 | tail -12; fi
if has hybrid; then echo "== hybrid reference vs transformers (issue 3)"; timeout 80 python bench/hybrid_reference.py 2>&1 | tee $OUT/hybrid.txt | tail -16; fi
if has verify; then echo "== verify cost (issue 6)"; timeout 60 python bench/verify_cost.py --layers 16 --shapes qwen3.5-27b --widths 1,4,8,16 --ctx 1024 --json $OUT/verify.json 2>&1 | tail -12; fi
if has qbench; then echo "== quant decode (issue 7)"; timeout 40 python bench/quant.py --layers 16 --peak-gbs 4200 2>&1 | tail -12; fi
