# lit configuration of the Tessel test suite.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Tessel"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tessel_obj_root, "test")

config.substitutions.append(("%examples", os.path.join(config.tessel_src_root, "examples")))
config.substitutions.append(("%scripts", os.path.join(config.tessel_src_root, "scripts")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["tessel-opt", "tessel-compile", "tessel-plan", "tessel-run"], [config.tessel_tools_dir])
llvm_config.add_tool_substitutions(["FileCheck", "not", "count"], [config.llvm_tools_dir])
