# Framework integrations: pydantic-ai, the OpenAI Agents SDK and LangChain v1, installed as
# personae's optional extras so tests/test_integrations_*.py run against the real libraries.
if ! pip_extras dev pydantic-ai openai-agents langchain; then
  echo "setup 40-integrations: pip could not install the integration extras" >&2
  return 1 2>/dev/null || exit 1
fi
