// Tests that input nested deeper than the tools' stated limit (10,000
// levels of brackets, types or regions; tools/ToolStack.h) is refused with
// a located error instead of overflowing the parser's stack, and that input
// at the limit parses (the tools run on a stack that holds it).
//
// RUN: python3 -c "n = 10001; print('func.func @f() attributes {a = ' + '[' * n + ']' * n + '} { return }')" > %t.deep.mlir
// RUN: not tessel-opt %t.deep.mlir 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not tessel-compile %t.deep.mlir -o %t.so 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: deep.mlir:1:10031: error: nesting deeper than 10000 levels of brackets, types or regions: refused
//
// RUN: python3 -c "n = 9999; print('func.func @f() attributes {a = ' + '[' * n + ']' * n + '} { return }')" > %t.limit.mlir
// RUN: tessel-opt %t.limit.mlir -o /dev/null
//
// RUN: python3 -c "n = 9998; print('func.func @g() {\n' + 'scf.execute_region {\n' * n + 'scf.yield\n}\n' * n + 'return\n}')" > %t.regions.mlir
// RUN: tessel-opt %t.regions.mlir -o /dev/null
//
// Brackets inside strings and comments are not nesting; "->" closes nothing.
// RUN: python3 -c "print('// ' + '[' * 20000 + '\nfunc.func @s(%%a: i32) -> i32 attributes {x = \"' + '(' * 20000 + '\"} { return %%a : i32 }')" > %t.strings.mlir
// RUN: tessel-opt %t.strings.mlir -o /dev/null
