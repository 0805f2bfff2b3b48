# Session 31, call 4: the conformance suite's tests from the 5601st in collection order on, which call 3's time limit
# cut off (it ran on the same warm machine). Kernels: call 1's (.kc_s31).
source bench/device_env.sh; mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s31/* $NINFER_KERNEL_CACHE/
python -m pytest --co -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>/dev/null | grep "::" > /tmp/ids.txt
wc -l < /tmp/ids.txt; tail -n +5601 /tmp/ids.txt > /tmp/tail.txt; wc -l < /tmp/tail.txt; head -1 /tmp/tail.txt
timeout 280 python -m pytest -q -p no:cacheprovider $(cat /tmp/tail.txt) > $OUT/tail.txt 2>&1; echo "rc $?"
tail -3 $OUT/tail.txt | cut -c1-300
