# The models scripts/gpu-check.sh runs, compiled by one tessel-compile:
# sourced by gpu-check.sh (which compiles them where it built) and by
# gpu-bundle.sh (which packs them for a GPU machine without a compiler).
#   compile_gpu_models TESSEL_COMPILE DIR
# DIR/gpt-sgd[-dp2|-tp2|-bf16].so: examples/gpt.mlir trained with SGD +
# momentum on one device, on dp=2 / tp=2 and in bf16; DIR/gpt124m-bf16.so: the benchmark's
# GPT-2 124M shape (12 layers, width 768, 12 heads, context 1024, vocabulary
# 50304, batch 8) in bf16 with AdamW.
compile_gpu_models() {
  local compiler=$1 dir=$2 here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local sgd=(--optimizer sgd --lr 0.1 --momentum 0.9)
  "$compiler" "$here/examples/gpt.mlir" "${sgd[@]}" -o "$dir/gpt-sgd.so" &&
    "$compiler" "$here/examples/gpt.mlir" "${sgd[@]}" --mesh dp=2 \
      -o "$dir/gpt-sgd-dp2.so" &&
    "$compiler" "$here/examples/gpt.mlir" "${sgd[@]}" --mesh tp=2 \
      -o "$dir/gpt-sgd-tp2.so" &&
    "$compiler" "$here/examples/gpt.mlir" "${sgd[@]}" --precision bf16 \
      -o "$dir/gpt-sgd-bf16.so" &&
    python3 "$here/bench/gpt-model.py" --batch 8 --seq 1024 --width 768 \
      --heads 12 --layers 12 --vocab 50304 >"$dir/gpt124m.mlir" &&
    "$compiler" "$dir/gpt124m.mlir" --optimizer adamw --precision bf16 \
      -o "$dir/gpt124m-bf16.so"
}
