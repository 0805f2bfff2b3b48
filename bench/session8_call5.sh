# Session 8, device call 5: where the Llama-3-8B step's time goes now that the host is hidden — kernel times of eager
# decode steps (PDL off, every layer) against the pipelined graph step, bf16 and W8A16. Kernels precompiled here
# (bench/precompile_sm90.sh .kc_s8b).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s8b}/* $NINFER_KERNEL_CACHE/
echo "== profile llama3-8b bf16, 32 layers"; NINFER_PDL=0 timeout 150 python bench/decode_profile.py --shape llama3-8b --layers 32 --capacity 32768 2>&1 | grep -v "^ninfer: compiling" | tail -30
echo "== profile 8B W8A16"; timeout 150 python bench/quant.py --parts profile --models "8B W8A16 g128" --profile-layers 32 --no-qgemv 2>&1 | grep -v "^ninfer: compiling\|ops of" | tail -30
