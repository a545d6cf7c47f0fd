// Entry points of the glmserve subcommands. Each takes the arguments after the subcommand name
// and returns the process exit code (0 ok, 1 runtime error, 2 usage error).
// One file per command: cmd_<name>.cc.
#pragma once

namespace glm::cli {

int cmd_gen_model(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_template(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_bench_engine(int argc, char** argv);
int cmd_bench_serve(int argc, char** argv);
int cmd_engine(int argc, char** argv);
int cmd_web(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_pull(int argc, char** argv);
int cmd_list(int argc, char** argv);
int cmd_rm(int argc, char** argv);
int cmd_devices(int argc, char** argv);

// True if argv holds -h or --help.
bool wants_help(int argc, char** argv);

}  // namespace glm::cli
