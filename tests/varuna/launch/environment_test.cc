#include "varuna/launch/environment.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ErrorOf(const std::map<std::string, std::string>& environment) {
  absl::StatusOr<LaunchEnvironment> env = LaunchEnvironment::Read(environment);
  EXPECT_FALSE(env.ok());
  return std::string(env.status().message());
}

TEST(LaunchEnvironmentTest, WhatTheLauncherWritesTheTrainerReads) {
  LaunchEnvironment written;
  written.rank = 5;
  written.local_rank = 1;
  written.world_size = 8;
  written.local_world_size = 4;
  written.node_rank = 1;
  written.master_addr = "10.0.0.1";
  written.master_port = 6000;
  const std::map<std::string, std::string> variables = written.Write();
  EXPECT_EQ(variables, (std::map<std::string, std::string>{{"GROUP_RANK", "1"},
                                                           {"LOCAL_RANK", "1"},
                                                           {"LOCAL_WORLD_SIZE", "4"},
                                                           {"MASTER_ADDR", "10.0.0.1"},
                                                           {"MASTER_PORT", "6000"},
                                                           {"RANK", "5"},
                                                           {"ROLE_RANK", "5"},
                                                           {"ROLE_WORLD_SIZE", "8"},
                                                           {"WORLD_SIZE", "8"}}));
  absl::StatusOr<LaunchEnvironment> read = LaunchEnvironment::Read(variables);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->launched());
  EXPECT_EQ(read->rank, 5);
  EXPECT_EQ(read->local_rank, 1);
  EXPECT_EQ(read->world_size, 8);
  EXPECT_EQ(read->local_world_size, 4);
  EXPECT_EQ(read->node_rank, 1);
  EXPECT_EQ(read->master_addr, "10.0.0.1");
  EXPECT_EQ(read->master_port, 6000);
}

TEST(LaunchEnvironmentTest, AProcessStartedAloneIsAJobOfItsOwn) {
  absl::StatusOr<LaunchEnvironment> env =
      LaunchEnvironment::Read({{"HOME", "/root"}, {"WORLD_SIZE", ""}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->launched());
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_FALSE(env->local_world_size.has_value());
  EXPECT_EQ(env->master_addr, "");
  EXPECT_EQ(env->master_port, 0);
  // A rank given alone (by hand) is read too.
  env = LaunchEnvironment::Read({{"RANK", "3"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 3);
  EXPECT_FALSE(env->launched());
}

TEST(LaunchEnvironmentTest, RefusesValuesThatAreNotNumbersOfTheirKind) {
  EXPECT_THAT(ErrorOf({{"RANK", "one"}}),
              AllOf(HasSubstr("RANK=\"one\" is not a rank"), HasSubstr("integer >= 0")));
  EXPECT_THAT(
      ErrorOf({{"WORLD_SIZE", "0"}}),
      HasSubstr("WORLD_SIZE=\"0\" is not a number of processes: set it to an integer >= 1"));
  EXPECT_THAT(ErrorOf({{"LOCAL_WORLD_SIZE", "x"}}),
              HasSubstr("LOCAL_WORLD_SIZE=\"x\" is not a number of processes per node"));
  EXPECT_THAT(ErrorOf({{"LOCAL_RANK", "-1"}}), HasSubstr("LOCAL_RANK=\"-1\" is not a rank"));
  EXPECT_THAT(ErrorOf({{"GROUP_RANK", "1.5"}}), HasSubstr("GROUP_RANK=\"1.5\" is not a node rank"));
  EXPECT_THAT(ErrorOf({{"MASTER_PORT", "70000"}}),
              HasSubstr("MASTER_PORT=\"70000\" is not a port: set it to an integer >= 1 and "
                        "<= 65535"));
}

TEST(LaunchEnvironmentTest, RefusesVariablesThatDisagree) {
  EXPECT_THAT(ErrorOf({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
              HasSubstr("RANK=4 and WORLD_SIZE=4 disagree"));
  EXPECT_THAT(ErrorOf({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
              HasSubstr("LOCAL_RANK=2 and LOCAL_WORLD_SIZE=2 disagree"));
  EXPECT_THAT(ErrorOf({{"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "4"}}),
              HasSubstr("LOCAL_WORLD_SIZE=4 and WORLD_SIZE=2 disagree"));
}

}  // namespace
}  // namespace varuna
