"""A mini-swe-agent environment for the tests: records the bash commands the agent decided on
(parsed from our server's tool calls) and answers each without running it, since a 135M model's
commands are not fit to execute on the test machine."""
import json
import os

from minisweagent.environments.local import LocalEnvironment


class RecordingEnvironment(LocalEnvironment):
    def execute(self, action, cwd="", *, timeout=None):
        command = action.get("command", "")
        with open(os.environ["RAPID_MINI_LOG"], "a") as f:
            f.write(json.dumps(command) + "\n")
        output = {"output": "ok (not run in the test)\n", "returncode": 0, "exception_info": ""}
        if command.strip() == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT":
            output["output"] = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"
        self._check_finished(output)
        return output
