#!/bin/sh
# print_exit.sh COMMAND [ARG...]: runs COMMAND, then prints "exit=N" (its exit
# status) on a line of its own, and exits 0. A ctest whose
# PASS_REGULAR_EXPRESSION ends in "exit=N" then checks the output and the
# exit code together (ctest ignores the exit code once a pass regex is set).
"$@"
echo "exit=$?"
