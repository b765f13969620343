"""Repository rules pointing DeepMind Lab's external dependencies at Debian 12's packages.

Puffer Core's own file (MIT), not part of DeepMind Lab. DeepMind Lab's WORKSPACE downloads
about sixteen archives; the WORKSPACE beside this file declares the same repository names with
these rules instead, so a build needs nothing but Debian's packages (see README.md here).
"""

def _libdir(ctx):
    """The multiarch library directory, e.g. /usr/lib/x86_64-linux-gnu."""
    res = ctx.execute(["gcc", "-print-multiarch"])
    arch = res.stdout.strip()
    return "/usr/lib/" + arch if res.return_code == 0 and arch else "/usr/lib"

def _system_repo_impl(ctx):
    libdir = _libdir(ctx)
    for dest, src in ctx.attr.links.items():
        src = src.replace("{libdir}", libdir)
        if not ctx.path(src).exists:
            fail("%s: %s is missing (install its Debian -dev package)" % (ctx.name, src))
        ctx.symlink(src, dest)
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    for path, content in ctx.attr.files.items():
        ctx.file(path, content)
    for command in ctx.attr.commands:
        res = ctx.execute(["sh", "-c", command.replace("{libdir}", libdir)])
        if res.return_code:
            fail("%s: `%s` failed: %s" % (ctx.name, command, res.stderr))

system_repo = repository_rule(
    implementation = _system_repo_impl,
    local = True,
    attrs = {
        # directory (or file) in the repository -> absolute path on the host ({libdir} expands)
        "links": attr.string_dict(),
        # file in the repository (BUILD files first of all) -> its content
        "files": attr.string_dict(),
        # shell commands run in the repository after that
        "commands": attr.string_list(),
    },
)

# absl/log arrived in Abseil 20230125; Debian 12 ships 20220623. DeepMind Lab uses only
# CHECK/QCHECK, CHECK_<op>, LOG(severity) and LOG_IF from it: this header gives those.
_ABSL_LOG_SHIM = """// Puffer Core's stand-in for absl/log/{check,log}.h (absent from Abseil 20220623).
#ifndef PUFFER_ABSL_LOG_SHIM_H_
#define PUFFER_ABSL_LOG_SHIM_H_
#include <cstdlib>
#include <iostream>
#include <sstream>
namespace puffer_absl_log {
enum Severity { INFO = 0, WARNING = 1, ERROR = 2, FATAL = 3, QFATAL = 4, DFATAL = 2 };
class Message {
 public:
  Message(const char* file, int line, int severity) : severity_(severity) {
    stream_ << "IWEFF"[severity] << ' ' << file << ':' << line << "] ";
  }
  ~Message() {
    stream_ << '\\n';
    std::cerr << stream_.str() << std::flush;
    if (severity_ >= FATAL) std::abort();
  }
  std::ostream& stream() { return stream_; }
 private:
  int severity_;
  std::ostringstream stream_;
};
struct Voidify {
  void operator&(std::ostream&) {}
};
}  // namespace puffer_absl_log
#define LOG(severity) \\
  ::puffer_absl_log::Message(__FILE__, __LINE__, ::puffer_absl_log::severity).stream()
#define LOG_IF(severity, condition) \\
  !(condition) ? (void)0 : ::puffer_absl_log::Voidify() & LOG(severity)
#define CHECK(condition) \\
  (condition) ? (void)0 : ::puffer_absl_log::Voidify() & LOG(FATAL) << "Check failed: " #condition " "
#define QCHECK(condition) CHECK(condition)
#define DCHECK(condition) CHECK(condition)
#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_NE(a, b) CHECK((a) != (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))
#endif  // PUFFER_ABSL_LOG_SHIM_H_
"""

# Every Bazel package and target of Abseil that DeepMind Lab (or a likely successor) names.
_ABSL_TARGETS = {
    "absl/algorithm": ["algorithm", "container"],
    "absl/base": ["base", "core_headers"],
    "absl/container": ["btree", "fixed_array", "flat_hash_map", "flat_hash_set", "inlined_vector", "node_hash_map", "node_hash_set"],
    "absl/flags": ["flag", "parse"],
    "absl/functional": ["bind_front", "function_ref"],
    "absl/hash": ["hash"],
    "absl/memory": ["memory"],
    "absl/meta": ["type_traits"],
    "absl/numeric": ["bits", "int128"],
    "absl/random": ["random"],
    "absl/status": ["status", "statusor"],
    "absl/strings": ["cord", "str_format", "strings"],
    "absl/synchronization": ["synchronization"],
    "absl/time": ["time"],
    "absl/types": ["any", "optional", "span", "variant"],
    "absl/utility": ["utility"],
}

def _absl_repo_impl(ctx):
    libdir = _libdir(ctx)
    if not ctx.path("/usr/include/absl/base/config.h").exists:
        fail("com_google_absl: /usr/include/absl is missing (apt-get install libabsl-dev)")
    res = ctx.execute(["sh", "-c", "cd %s && ls libabsl_*.so" % libdir])
    libs = sorted([f[3:-3] for f in res.stdout.strip().split("\n") if f])
    if not libs:
        fail("com_google_absl: no libabsl_*.so in %s (apt-get install libabsl-dev)" % libdir)
    ctx.file("WORKSPACE", 'workspace(name = "com_google_absl")\n')
    ctx.file("absl/log/check.h", _ABSL_LOG_SHIM)
    ctx.file("absl/log/log.h", _ABSL_LOG_SHIM)
    ctx.file("absl/log/BUILD", "".join([
        'cc_library(name = "%s", hdrs = ["%s.h"], deps = ["//:absl"], visibility = ["//visibility:public"])\n' % (t, t)
        for t in ["check", "log"]
    ]))
    ctx.file("BUILD", """cc_library(
    name = "absl",
    linkopts = %r,
    visibility = ["//visibility:public"],
)
""" % (["-L" + libdir] + ["-l" + lib for lib in libs]))
    for package, targets in _ABSL_TARGETS.items():
        ctx.file(package + "/BUILD", "".join([
            'alias(name = "%s", actual = "//:absl", visibility = ["//visibility:public"])\n' % t
            for t in targets
        ]))

absl_repo = repository_rule(implementation = _absl_repo_impl, local = True)
