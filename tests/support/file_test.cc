#include "stowage/support/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stowage {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt_name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string fmt_name() {
    return "stowage_file_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(FileTest, ReadsARegularFile) {
  write("a.txt", std::string("hello\0world", 11));
  auto bytes = read_regular_file(path("a.txt"), 11, "test file");
  ASSERT_TRUE(bytes) << bytes.error().message();
  EXPECT_EQ(*bytes, std::string("hello\0world", 11));
}

TEST_F(FileTest, RefusesAFileOverTheLimit) {
  write("a.txt", "0123456789");
  auto bytes = read_regular_file(path("a.txt"), 9, "test file");
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(bytes.error().message(),
            "cannot read test file '" + path("a.txt") + "': 10 bytes exceed the limit of 9");
}

TEST_F(FileTest, RefusesADirectory) {
  auto bytes = read_regular_file(dir_.string(), 100, "text IR file");
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(bytes.error().message(),
            "cannot read text IR file '" + dir_.string() + "': it is a directory, not a regular file");
}

// Opening a FIFO for reading waits for a writer unless refused first: this test
// would hang before the check.
TEST_F(FileTest, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  auto bytes = read_regular_file(path("fifo"), 100, "test file");
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().message(), "cannot read test file '" + path("fifo") + "': it is a FIFO, not a regular file");
}

TEST_F(FileTest, RefusesADevice) {
  auto bytes = read_regular_file("/dev/zero", 1 << 20, "test file");
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().message(), "cannot read test file '/dev/zero': it is a character device, not a regular file");
}

TEST_F(FileTest, NamesAMissingFile) {
  auto bytes = read_regular_file(path("missing"), 100, "test file");
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(bytes.error().message(), "cannot read test file '" + path("missing") + "': No such file or directory");
}

TEST_F(FileTest, FollowsOrRefusesSymbolicLinks) {
  write("target", "abc");
  fs::create_symlink(path("target"), path("link"));
  auto followed = read_regular_file(path("link"), 100, "test file");
  ASSERT_TRUE(followed) << followed.error().message();
  EXPECT_EQ(*followed, "abc");
  auto refused = read_regular_file(path("link"), 100, "cache file", Symlinks::kRefuse);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message(), "cannot read cache file '" + path("link") + "': it is a symbolic link");
}

TEST_F(FileTest, WritesAtomicallyAndReplacesALinkInsteadOfFollowingIt) {
  write("victim", "precious");
  fs::create_symlink(path("victim"), path("out"));
  ASSERT_TRUE(write_file_atomically(path("out"), "new bytes", "test file"));
  EXPECT_FALSE(fs::is_symlink(path("out")));
  EXPECT_EQ(*read_regular_file(path("out"), 100, "test file"), "new bytes");
  EXPECT_EQ(*read_regular_file(path("victim"), 100, "test file"), "precious");
  // Only the file itself is left: no temporary file behind it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);
  struct stat st {};
  ASSERT_EQ(::stat(path("out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(FileTest, WriteNamesTheFailure) {
  Status status = write_file_atomically(path("no/such/dir/out"), "x", "test file");
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(status.error().message(), "cannot write test file '" + path("no/such/dir/out") +
                                          "': cannot create a temporary file: No such file or directory");
}

}  // namespace
}  // namespace stowage
