// Every user-named output file (search/launch --out, report --html, db
// export --csv, regress baseline export --file) is checked before the work
// and written atomically: on a full disk the command fails with a one-line
// error (exit 1) and the previous file survives, with no temporary file
// left; a missing directory or a directory as the target is an input error
// (exit 2). The full disk is RLIMIT_FSIZE, which works as root too.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <sstream>
#include <string>
#include <vector>

#include "tests/file_faults.h"
#include "tests/tuner/run_tune.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/commands/cli.h"
#include "tuner/io/output_file.h"
#include "tuner/regress/baseline_file.h"

namespace meshtune::tuner {
namespace {

using test_files::FileSizeLimit;
using test_files::ListDir;
using testing::InProcessRun;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::Tune;
using testing::WriteFile;

// The last two lines of `err`: the error and its hint.
std::string LastTwoLines(const std::string& err) {
  size_t pos = err.size();
  for (int newlines = 0; pos > 0; --pos) {
    if (err[pos - 1] == '\n' && ++newlines == 3) break;
  }
  return err.substr(pos);
}

std::string FullDiskError(const std::string& what, const std::string& path) {
  return "tune: error: cannot write " + what + " '" + path +
         "': File too large\n"
         "tune: hint: free disk space or choose another path; the previous "
         "file, if any, is unchanged\n";
}

const std::vector<std::string> kTiny = {"--model",   "gpt-tiny", "--gpus", "2",
                                        "--gpu",     "local",    "--gbs",  "4",
                                        "--seq-len", "64"};

std::vector<std::string> Args(std::vector<std::string> head,
                              const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

TEST(CheckOutputPath, NamesTheFlagAndTheProblem) {
  const std::string dir = MakeTempDir();
  EXPECT_TRUE(CheckOutputPath(dir + "/new.yaml", "--out").ok());
  EXPECT_TRUE(CheckOutputPath("relative.yaml", "--out").ok());

  Status s = CheckOutputPath("", "--out");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_EQ(s.message(), "--out: the file name is empty");

  s = CheckOutputPath(dir, "--html");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_EQ(s.message(), "--html: '" + dir + "' is a directory");
  EXPECT_EQ(s.hint(), "give a file name, e.g. " + dir + "/out");

  s = CheckOutputPath(dir + "/no/such/r.html", "--html");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_EQ(s.message(), "--html: cannot write '" + dir +
                             "/no/such/r.html': directory '" + dir +
                             "/no/such': No such file or directory");
  EXPECT_EQ(s.hint(), "create the directory first, or write somewhere else");

  WriteFile(dir + "/file", "x");
  s = CheckOutputPath(dir + "/file/r.csv", "--csv");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_EQ(s.message(), "--csv: cannot write '" + dir + "/file/r.csv': '" +
                             dir + "/file' is not a directory");
}

TEST(FullDiskWrites, SearchOutKeepsThePreviousYaml) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/best.yaml";
  WriteFile(path, "old: yaml\n");
  InProcessRun run;
  {
    FileSizeLimit limit(64);
    run = Tune(Args({"search", "--no-db", "--out", path}, kTiny));
  }
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(LastTwoLines(run.err), FullDiskError("--out file", path));
  EXPECT_EQ(ReadFile(path), "old: yaml\n");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"best.yaml"});

  // With room, the same command replaces it.
  ASSERT_EQ(Tune(Args({"search", "--no-db", "--out", path}, kTiny)).exit_code,
            0);
  EXPECT_NE(ReadFile(path).find("parallelism:"), std::string::npos);
}

TEST(FullDiskWrites, SearchOutIntoAMissingDirectoryIsAnInputError) {
  const std::string dir = MakeTempDir();
  const InProcessRun run =
      Tune(Args({"search", "--no-db", "--out", dir + "/no/best.yaml"}, kTiny));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "tune: error: --out: cannot write '" + dir +
                         "/no/best.yaml': directory '" + dir +
                         "/no': No such file or directory\n"
                         "tune: hint: create the directory first, or write "
                         "somewhere else\n");
}

TEST(FullDiskWrites, ReportHtmlKeepsThePreviousReport) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/r.html";
  WriteFile(path, "<p>old</p>\n");
  InProcessRun run;
  {
    FileSizeLimit limit(64);
    run = Tune(Args({"report", "--no-db", "--html", path}, kTiny));
  }
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(LastTwoLines(run.err), FullDiskError("--html file", path));
  EXPECT_EQ(ReadFile(path), "<p>old</p>\n");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"r.html"});
}

TEST(FullDiskWrites, ReportHtmlIntoADirectoryFailsBeforeSearching) {
  const std::string dir = MakeTempDir();
  const InProcessRun run =
      Tune(Args({"report", "--no-db", "--html", dir}, kTiny));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "tune: error: --html: '" + dir +
                         "' is a directory\n"
                         "tune: hint: give a file name, e.g. " +
                         dir + "/out\n");
}

TEST(FullDiskWrites, DbExportCsvKeepsThePreviousCsv) {
  const std::string dir = MakeTempDir();
  const std::string db = dir + "/t.db";
  ASSERT_EQ(Tune(Args({"search", "--db", db}, kTiny)).exit_code, 0);
  const std::string path = dir + "/s.csv";
  WriteFile(path, "old,csv\n");
  const std::vector<std::string> before = ListDir(dir);
  InProcessRun run;
  {
    FileSizeLimit limit(16);
    run = Tune(
        {"db", "export", "--db", db, "--table", "candidates", "--csv", path});
  }
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, FullDiskError("--csv file", path));
  EXPECT_EQ(ReadFile(path), "old,csv\n");
  EXPECT_EQ(ListDir(dir), before);
}

TEST(FullDiskWrites, DbExportCsvIntoAMissingDirectoryFailsBeforeOpening) {
  const std::string dir = MakeTempDir();
  // The database does not exist either: the output path is checked first.
  const InProcessRun run =
      Tune({"db", "export", "--db", dir + "/none.db", "--table", "searches",
            "--csv", dir + "/no/s.csv"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "tune: error: --csv: cannot write '" + dir +
                         "/no/s.csv': directory '" + dir +
                         "/no': No such file or directory\n"
                         "tune: hint: create the directory first, or write "
                         "somewhere else\n");
}

TEST(FullDiskWrites, LaunchOutKeepsThePreviousScriptAndConfig) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/job.sh", "#!/bin/sh\necho old\n");
  WriteFile(dir + "/job.yaml", "old: yaml\n");
  InProcessRun run;
  {
    FileSizeLimit limit(64);
    run = Tune(Args({"launch", "--no-db", "--quiet", "--out", dir + "/job.sh"},
                    kTiny));
  }
  EXPECT_EQ(run.exit_code, 1);
  // The config YAML is written first; its failure stops the command.
  EXPECT_EQ(LastTwoLines(run.err),
            FullDiskError("--out file", dir + "/job.yaml"));
  EXPECT_EQ(ReadFile(dir + "/job.sh"), "#!/bin/sh\necho old\n");
  EXPECT_EQ(ReadFile(dir + "/job.yaml"), "old: yaml\n");
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"job.sh", "job.yaml"}));

  // Trainer megatron (on GPUs) writes the script alone.
  {
    FileSizeLimit limit(64);
    run = Tune({"launch", "--no-db", "--quiet", "--model", "gpt-tiny", "--gpus",
                "2", "--gpu", "h100", "--gbs", "4", "--seq-len", "64", "--out",
                dir + "/job.sh"});
  }
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(LastTwoLines(run.err),
            FullDiskError("--out file", dir + "/job.sh"));
  EXPECT_EQ(ReadFile(dir + "/job.sh"), "#!/bin/sh\necho old\n");
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"job.sh", "job.yaml"}));
}

TEST(FullDiskWrites, LaunchOutIntoAMissingDirectoryFailsBeforeSearching) {
  const std::string dir = MakeTempDir();
  const InProcessRun run =
      Tune(Args({"launch", "--no-db", "--out", dir + "/no/job.sh"}, kTiny));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "tune: error: --out: cannot write '" + dir +
                         "/no/job.sh': directory '" + dir +
                         "/no': No such file or directory\n"
                         "tune: hint: create the directory first, or write "
                         "somewhere else\n");
}

TEST(FullDiskWrites, EmptyOutFileNameIsAnInputError) {
  const InProcessRun launch =
      Tune(Args({"launch", "--no-db", "--out", ""}, kTiny));
  EXPECT_EQ(launch.exit_code, 2);
  EXPECT_EQ(launch.out, "");
  EXPECT_EQ(launch.err,
            "tune: error: --out: the file name is empty\n"
            "tune: hint: give the path of the file to write\n");
  const InProcessRun csv =
      Tune({"db", "export", "--table", "searches", "--csv", ""});
  EXPECT_EQ(csv.exit_code, 2);
  EXPECT_EQ(csv.err,
            "tune: error: --csv: the file name is empty\n"
            "tune: hint: give the path of the file to write\n");
}

TEST(FullDiskWrites, BaselineFileKeepsThePreviousFile) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/main.json";
  WriteFile(path, "{\"old\": 1}\n");
  BaselineFile file;
  file.baseline.name = "main";
  file.baseline.result.benchmark = "cpu-gpt-tiny-v1";
  Status status;
  {
    FileSizeLimit limit(16);
    status = WriteBaselineFile(path, file);
  }
  EXPECT_EQ(status.ExitCode(), 1);
  EXPECT_EQ(status.message(),
            "cannot write --file file '" + path + "': File too large");
  EXPECT_EQ(ReadFile(path), "{\"old\": 1}\n");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"main.json"});
  ASSERT_TRUE(WriteBaselineFile(path, file).ok());
  EXPECT_NE(ReadFile(path).find("cpu-gpt-tiny-v1"), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
