"""OpenEnv's agent-script convention: ``python inference.py`` plays the emergency department
with an LLM behind any OpenAI-compatible API and prints the [START]/[STEP]/[END] lines.

    export API_BASE_URL=https://router.huggingface.co/v1  MODEL_NAME=...  API_KEY=...
    python inference.py --scenarios surge --track team

The same as ``hospital-marl llm``; see ``hospital_marl_cli/agents/llm.py`` for the protocol and options.
"""

import sys

from hospital_marl_cli.agents.llm import main

if __name__ == "__main__":
    sys.exit(main())
