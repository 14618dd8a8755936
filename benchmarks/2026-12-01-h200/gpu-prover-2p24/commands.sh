set -u
cd .dev-bin && gunzip -f *.gz && chmod +x * && cd ..
W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "=== tests"; SPLITPROVER_TEST_REQUIRE_GPU=1 .dev-bin/gpu-test --test-threads 1 2>&1 | tail -9 | tee $OUT/tests.txt
echo "=== 2^20 gen-check"; .dev-bin/gpu_check sha-chain:38 --params $W/p20.params --gen-check --seeds 2 --cpu 1 --iters 5 --supraseal --phases 2>&1 | tail -9 | tee $OUT/p20.txt
echo "=== 2^22"; .dev-bin/gpu_check sha-chain:162 --params $W/p22.params --gen gpu --seeds 4 --par 4 --cpu 1 --iters 5 --supraseal --phases 2>&1 | tail -9 | tee $OUT/p22.txt
echo "=== 2^24"; .dev-bin/gpu_check sha-chain:650 --params $W/p24.params --gen gpu --seeds 100 --par 12 --cpu 1 --iters 3 --supraseal --phases 2>&1 | tail -14 | tee $OUT/p24.txt
free -g | head -2
