; ModuleID = 'test/E2E/repeat-dropout.mlir'
source_filename = "test/E2E/repeat-dropout.mlir"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@__tessel_model_json = private constant [1520 x i8] c"{\22abi_version\22:3,\22arena_bytes\22:852160,\22entries\22:{\22backward\22:\22tessel_backward\22,\22forward\22:\22tessel_forward\22,\22update\22:\22tessel_update\22},\22entry\22:\22tessel_forward\22,\22function\22:\22loss\22,\22peak_bytes\22:458752,\22regions\22:{\22control\22:{\22bytes\22:64,\22offset\22:393280},\22grads\22:{\22bytes\22:131072,\22offset\22:131072},\22inputs\22:{\22bytes\22:64,\22offset\22:393216},\22outputs\22:{\22bytes\22:64,\22offset\22:393344},\22params\22:{\22bytes\22:131072,\22offset\22:0},\22scratch\22:{\22bytes\22:458752,\22offset\22:393408},\22states\22:{\22bytes\22:131072,\22offset\22:262144}},\22source\22:\22test/E2E/repeat-dropout.mlir\22,\22tensors\22:[{\22axes\22:[],\22bytes\22:131072,\22dtype\22:\22f64\22,\22init\22:{\22args\22:[0,0],\22kind\22:\22ones\22},\22name\22:\22scale\22,\22offset\22:0,\22role\22:\22param\22,\22shape\22:[2,2,4096],\22trainable\22:true},{\22axes\22:[],\22bytes\22:131072,\22dtype\22:\22f64\22,\22name\22:\22scale\22,\22offset\22:131072,\22role\22:\22grad\22,\22shape\22:[2,2,4096]},{\22axes\22:[],\22bytes\22:65536,\22dtype\22:\22f32\22,\22name\22:\22scale.m\22,\22offset\22:262144,\22role\22:\22state\22,\22shape\22:[2,2,4096]},{\22axes\22:[],\22bytes\22:65536,\22dtype\22:\22f32\22,\22name\22:\22scale.v\22,\22offset\22:327680,\22role\22:\22state\22,\22shape\22:[2,2,4096]},{\22axes\22:[\22batch\22],\22bytes\22:8,\22dtype\22:\22f64\22,\22name\22:\22input0\22,\22offset\22:393216,\22role\22:\22input\22,\22shape\22:[1]},{\22bytes\22:4,\22dtype\22:\22f32\22,\22name\22:\22grad_scale\22,\22offset\22:393280,\22role\22:\22grad_scale\22,\22shape\22:[]},{\22bytes\22:8,\22dtype\22:\22f64\22,\22name\22:\22loss\22,\22offset\22:393344,\22role\22:\22loss\22,\22shape\22:[]}],\22train\22:{\22beta1\22:0.90000000000000002,\22beta2\22:0.999,\22clip\22:0,\22eps\22:1e-08,\22lr\22:0.001,\22min_lr\22:0,\22momentum\22:0,\22nesterov\22:false,\22optimizer\22:\22adamw\22,\22recompute\22:\22none\22,\22schedule\22:\22constant\22,\22total_steps\22:0,\22warmup\22:0,\22weight_decay\22:0.01}}\00"
@__tessel_const_3 = private constant [48 x i8] c"\02\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\CD\CC\CC\CC\CC\CC\EC?+\87\16\D9\CE\F7\EF?:\8C0\E2\8EyE>{\14\AEG\E1z\84?", align 64
@__tessel_const_2 = private constant [8 x i8] c"\00\00\00\00\00\00\F0?", align 64
@__tessel_const_1 = private constant [8 x i8] c"\00\00\00\00\00\000?", align 64
@__tessel_i64s_3 = private constant [1 x i64] [i64 1], align 8
@__tessel_i64s_2 = private constant [1 x i64] zeroinitializer, align 8
@__tessel_i64s_1 = private constant [1 x i64] [i64 4096], align 8
@__tessel_const_0 = private constant [8 x i8] c"\00\00\00\00\00\00\F0?", align 64

define void @tessel_fn_drop(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4) local_unnamed_addr {
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %2, ptr %3, ptr %1, i64 4096)
  %6 = tail call i64 @tessel_get_step(ptr %0)
  %7 = tail call i64 @tessel_get_microbatch(ptr %0)
  %8 = shl i64 %7, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %1, ptr %4, i64 4096, double 5.000000e-01, i64 11, i64 %6, i64 %8)
  ret void
}

declare void @tessel_binary(ptr, i32, i32, ptr, ptr, ptr, i64) local_unnamed_addr

declare i64 @tessel_get_step(ptr) local_unnamed_addr

declare i64 @tessel_get_microbatch(ptr) local_unnamed_addr

declare void @tessel_dropout(ptr, i32, ptr, ptr, i64, double, i64, i64, i64) local_unnamed_addr

define void @tessel_fn_drop_keep(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4, ptr %5) local_unnamed_addr {
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %2, ptr %3, ptr %1, i64 4096)
  %7 = tail call i64 @tessel_get_step(ptr %0)
  %8 = tail call i64 @tessel_get_microbatch(ptr %0)
  %9 = shl i64 %8, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %1, ptr %4, i64 4096, double 5.000000e-01, i64 11, i64 %7, i64 %9)
  tail call void @tessel_copy(ptr %0, ptr %5, ptr %2, i64 32768)
  ret void
}

declare void @tessel_copy(ptr, ptr, ptr, i64) local_unnamed_addr

define void @tessel_fn_drop_derivative(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4, ptr %5, ptr %6) local_unnamed_addr {
  %8 = tail call i64 @tessel_get_step(ptr %0)
  %9 = tail call i64 @tessel_get_microbatch(ptr %0)
  %10 = shl i64 %9, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %2, ptr %1, i64 4096, double 5.000000e-01, i64 11, i64 %8, i64 %10)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %1, ptr %4, ptr %5, i64 4096)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %1, ptr %3, ptr %6, i64 4096)
  ret void
}

define void @tessel_fn_pair(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4) local_unnamed_addr {
  %6 = getelementptr i8, ptr %1, i64 32768
  %7 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %8 = tail call i64 @tessel_fold_in(i64 %7, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %8)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %2, ptr %3, ptr %6, i64 4096)
  %9 = tail call i64 @tessel_get_step(ptr %0)
  %10 = tail call i64 @tessel_get_microbatch(ptr %0)
  %11 = shl i64 %10, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %6, ptr %1, i64 4096, double 5.000000e-01, i64 11, i64 %9, i64 %11)
  %12 = tail call i64 @tessel_fold_in(i64 %7, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %12)
  %13 = getelementptr i8, ptr %3, i64 32768
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %1, ptr %13, ptr %6, i64 4096)
  %14 = tail call i64 @tessel_get_step(ptr %0)
  %15 = tail call i64 @tessel_get_microbatch(ptr %0)
  %16 = shl i64 %15, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %6, ptr %4, i64 4096, double 5.000000e-01, i64 11, i64 %14, i64 %16)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %7)
  ret void
}

declare i64 @tessel_get_rng_stream(ptr) local_unnamed_addr

declare i64 @tessel_fold_in(i64, i64) local_unnamed_addr

declare void @tessel_set_rng_stream(ptr, i64) local_unnamed_addr

define void @tessel_fn_pair_keep(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4, ptr %5) local_unnamed_addr {
  %7 = getelementptr i8, ptr %1, i64 32768
  %8 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %9 = tail call i64 @tessel_fold_in(i64 %8, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %9)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %2, ptr %3, ptr %7, i64 4096)
  %10 = tail call i64 @tessel_get_step(ptr %0)
  %11 = tail call i64 @tessel_get_microbatch(ptr %0)
  %12 = shl i64 %11, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %7, ptr %1, i64 4096, double 5.000000e-01, i64 11, i64 %10, i64 %12)
  %13 = tail call i64 @tessel_fold_in(i64 %8, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %13)
  %14 = getelementptr i8, ptr %3, i64 32768
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %1, ptr %14, ptr %7, i64 4096)
  %15 = tail call i64 @tessel_get_step(ptr %0)
  %16 = tail call i64 @tessel_get_microbatch(ptr %0)
  %17 = shl i64 %16, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %7, ptr %4, i64 4096, double 5.000000e-01, i64 11, i64 %15, i64 %17)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %8)
  tail call void @tessel_copy(ptr %0, ptr %5, ptr %2, i64 32768)
  ret void
}

define void @tessel_fn_pair_derivative(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4, ptr %5, ptr %6) local_unnamed_addr {
  %8 = getelementptr i8, ptr %1, i64 65536
  %9 = getelementptr i8, ptr %1, i64 32768
  %10 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %11 = tail call i64 @tessel_fold_in(i64 %10, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %11)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %3, ptr %4, ptr %9, i64 4096)
  %12 = tail call i64 @tessel_get_step(ptr %0)
  %13 = tail call i64 @tessel_get_microbatch(ptr %0)
  %14 = shl i64 %13, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %9, ptr %1, i64 4096, double 5.000000e-01, i64 11, i64 %12, i64 %14)
  tail call void @tessel_copy(ptr %0, ptr %8, ptr %3, i64 32768)
  %15 = tail call i64 @tessel_fold_in(i64 %10, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %15)
  %16 = getelementptr i8, ptr %4, i64 32768
  %17 = getelementptr i8, ptr %1, i64 131072
  %18 = getelementptr i8, ptr %1, i64 98304
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %1, ptr %16, ptr %9, i64 4096)
  %19 = tail call i64 @tessel_get_step(ptr %0)
  %20 = tail call i64 @tessel_get_microbatch(ptr %0)
  %21 = shl i64 %20, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %9, ptr %17, i64 4096, double 5.000000e-01, i64 11, i64 %19, i64 %21)
  tail call void @tessel_copy(ptr %0, ptr %18, ptr %1, i64 32768)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %10)
  %22 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %23 = tail call i64 @tessel_fold_in(i64 %22, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %23)
  %24 = getelementptr i8, ptr %6, i64 32768
  %25 = tail call i64 @tessel_get_step(ptr %0)
  %26 = tail call i64 @tessel_get_microbatch(ptr %0)
  %27 = shl i64 %26, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %2, ptr %9, i64 4096, double 5.000000e-01, i64 11, i64 %25, i64 %27)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %9, ptr %16, ptr %1, i64 4096)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %9, ptr %18, ptr %24, i64 4096)
  %28 = tail call i64 @tessel_fold_in(i64 %22, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %28)
  %29 = tail call i64 @tessel_get_step(ptr %0)
  %30 = tail call i64 @tessel_get_microbatch(ptr %0)
  %31 = shl i64 %30, 12
  tail call void @tessel_dropout(ptr %0, i32 3, ptr %1, ptr %9, i64 4096, double 5.000000e-01, i64 11, i64 %29, i64 %31)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %9, ptr %4, ptr %5, i64 4096)
  tail call void @tessel_binary(ptr %0, i32 2, i32 3, ptr %9, ptr %8, ptr %6, i64 4096)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %22)
  ret void
}

define void @tessel_fn_loss(ptr %0, ptr %1, ptr readnone captures(none) %2, ptr %3, ptr %4) local_unnamed_addr {
  %6 = getelementptr i8, ptr %1, i64 98304
  tail call void @tessel_strided_copy(ptr %0, i32 3, ptr nonnull @__tessel_const_0, ptr %6, i32 1, ptr nonnull @__tessel_i64s_1, ptr nonnull @__tessel_i64s_2, ptr nonnull @__tessel_i64s_3)
  %7 = getelementptr i8, ptr %1, i64 131072
  %8 = getelementptr i8, ptr %1, i64 32768
  %9 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %10 = tail call i64 @tessel_fold_in(i64 %9, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %10)
  tail call void @tessel_fn_pair(ptr %0, ptr %8, ptr %6, ptr %3, ptr %1)
  %11 = tail call i64 @tessel_fold_in(i64 %9, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %11)
  %12 = getelementptr i8, ptr %3, i64 65536
  tail call void @tessel_fn_pair(ptr %0, ptr %8, ptr %1, ptr %12, ptr %7)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %9)
  tail call void @tessel_reduce(ptr %0, i32 1, i32 3, ptr %7, ptr %4, i32 1, ptr nonnull @__tessel_i64s_1, i64 1)
  ret void
}

declare void @tessel_strided_copy(ptr, i32, ptr, ptr, i32, ptr, ptr, ptr) local_unnamed_addr

declare void @tessel_reduce(ptr, i32, i32, ptr, ptr, i32, ptr, i64) local_unnamed_addr

define void @tessel_fn_loss_backward(ptr %0, ptr %1, ptr readnone captures(none) %2, ptr %3, ptr %4, ptr %5, ptr %6) local_unnamed_addr {
  %8 = getelementptr i8, ptr %1, i64 393216
  tail call void @tessel_strided_copy(ptr %0, i32 3, ptr nonnull @__tessel_const_1, ptr %8, i32 1, ptr nonnull @__tessel_i64s_1, ptr nonnull @__tessel_i64s_2, ptr nonnull @__tessel_i64s_3)
  %9 = getelementptr i8, ptr %1, i64 98304
  tail call void @tessel_strided_copy(ptr %0, i32 3, ptr nonnull @__tessel_const_2, ptr %9, i32 1, ptr nonnull @__tessel_i64s_1, ptr nonnull @__tessel_i64s_2, ptr nonnull @__tessel_i64s_3)
  %10 = getelementptr i8, ptr %1, i64 131072
  %11 = getelementptr i8, ptr %1, i64 327680
  %12 = getelementptr i8, ptr %1, i64 32768
  %13 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %14 = tail call i64 @tessel_fold_in(i64 %13, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %14)
  tail call void @tessel_fn_pair_keep(ptr %0, ptr %12, ptr %9, ptr %3, ptr %1, ptr %11)
  %15 = tail call i64 @tessel_fold_in(i64 %13, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %15)
  %16 = getelementptr i8, ptr %3, i64 65536
  %17 = getelementptr i8, ptr %1, i64 360448
  tail call void @tessel_fn_pair_keep(ptr %0, ptr %12, ptr %1, ptr %16, ptr %10, ptr %17)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %13)
  tail call void @tessel_reduce(ptr %0, i32 1, i32 3, ptr %10, ptr %5, i32 1, ptr nonnull @__tessel_i64s_1, i64 1)
  %18 = getelementptr i8, ptr %1, i64 196608
  %19 = tail call i64 @tessel_get_rng_stream(ptr %0)
  %20 = tail call i64 @tessel_fold_in(i64 %19, i64 1)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %20)
  %21 = getelementptr i8, ptr %1, i64 262144
  tail call void @tessel_fn_pair_derivative(ptr %0, ptr %12, ptr %8, ptr %17, ptr %16, ptr %1, ptr %21)
  %22 = tail call i64 @tessel_fold_in(i64 %19, i64 0)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %22)
  %23 = getelementptr i8, ptr %1, i64 425984
  tail call void @tessel_fn_pair_derivative(ptr %0, ptr %12, ptr %1, ptr %11, ptr %3, ptr %23, ptr %18)
  tail call void @tessel_set_rng_stream(ptr %0, i64 %19)
  tail call void @tessel_binary(ptr %0, i32 0, i32 3, ptr %4, ptr %18, ptr %4, i64 16384)
  tail call void @tessel_copy(ptr %0, ptr %6, ptr %4, i64 131072)
  ret void
}

define void @tessel_fn_loss_update(ptr %0, ptr readnone captures(none) %1, ptr %2, ptr %3, ptr %4, ptr %5, ptr %6, ptr %7, ptr %8, ptr %9) local_unnamed_addr {
  %11 = tail call i64 @tessel_get_step(ptr %0)
  %12 = add i64 %11, 1
  %13 = tail call double @tessel_lr_at(i32 0, double 1.000000e-03, double 0.000000e+00, i64 0, i64 0, i64 %12)
  tail call void @tessel_optimizer_update(ptr %0, ptr nonnull @__tessel_const_3, i32 3, ptr %2, ptr %3, ptr %6, ptr %4, ptr %5, i64 16384, i64 %12, double %13)
  tail call void @tessel_copy(ptr %0, ptr %7, ptr %2, i64 131072)
  tail call void @tessel_copy(ptr %0, ptr %8, ptr %4, i64 65536)
  tail call void @tessel_copy(ptr %0, ptr %9, ptr %5, i64 65536)
  ret void
}

declare double @tessel_lr_at(i32, double, double, i64, i64, i64) local_unnamed_addr

declare void @tessel_optimizer_update(ptr, ptr, i32, ptr, ptr, ptr, ptr, ptr, i64, i64, double) local_unnamed_addr

define void @tessel_forward(ptr %0, ptr %1) local_unnamed_addr {
  %3 = getelementptr i8, ptr %1, i64 393408
  %4 = getelementptr i8, ptr %1, i64 393344
  tail call void @tessel_fn_loss(ptr %0, ptr %3, ptr poison, ptr %1, ptr %4)
  ret void
}

define void @tessel_backward(ptr %0, ptr %1) local_unnamed_addr {
  %3 = getelementptr i8, ptr %1, i64 393408
  %4 = getelementptr i8, ptr %1, i64 131072
  %5 = getelementptr i8, ptr %1, i64 393344
  tail call void @tessel_fn_loss_backward(ptr %0, ptr %3, ptr poison, ptr %1, ptr %4, ptr %5, ptr %4)
  ret void
}

define void @tessel_update(ptr %0, ptr %1) local_unnamed_addr {
  %3 = getelementptr i8, ptr %1, i64 131072
  %4 = getelementptr i8, ptr %1, i64 262144
  %5 = getelementptr i8, ptr %1, i64 327680
  %6 = getelementptr i8, ptr %1, i64 393280
  %7 = tail call i64 @tessel_get_step(ptr %0)
  %8 = add i64 %7, 1
  %9 = tail call double @tessel_lr_at(i32 0, double 1.000000e-03, double 0.000000e+00, i64 0, i64 0, i64 %8)
  tail call void @tessel_optimizer_update(ptr %0, ptr nonnull @__tessel_const_3, i32 3, ptr %1, ptr %3, ptr %6, ptr %4, ptr %5, i64 16384, i64 %8, double %9)
  tail call void @tessel_copy(ptr %0, ptr %1, ptr %1, i64 131072)
  tail call void @tessel_copy(ptr %0, ptr %4, ptr %4, i64 65536)
  tail call void @tessel_copy(ptr %0, ptr %5, ptr %5, i64 65536)
  ret void
}

; Function Attrs: mustprogress nofree norecurse nosync nounwind willreturn memory(none)
define noundef nonnull ptr @tessel_model_json() local_unnamed_addr #0 {
  ret ptr @__tessel_model_json
}

attributes #0 = { mustprogress nofree norecurse nosync nounwind willreturn memory(none) }

!llvm.module.flags = !{!0}

!0 = !{i32 2, !"Debug Info Version", i32 3}
