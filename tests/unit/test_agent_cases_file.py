"""The shipped Agent cases are data (`checks/agent/cases.yaml`), read through a strict model:
the file gives the case set the coverage rule requires, in order, and a typo in it is refused
naming the file and the key instead of silently dropping a field."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from golive.checks.agent import cases
from golive.checks.agent.rules import Expect
from golive.checks.coverage import SHIPPED_CASES
from golive.errors import ConfigError
from golive.yaml_input import validated


def test_the_file_gives_every_case_the_coverage_rule_requires_in_order() -> None:
    """The case names, in run order, are the ones a bundle must carry (coverage.SHIPPED_CASES)."""
    assert tuple(c.name for c in cases.shipped_cases()) == SHIPPED_CASES


def test_a_case_is_built_from_its_conversation_tools_and_choice() -> None:
    """A case's messages are its conversation then its own turns, its tools the shipped schemas
    by name, and a named tool_choice the OpenAI form."""
    by_name = {c.name: c for c in cases.shipped_cases()}
    named = by_name["one_arg.named"]
    assert [t["function"]["name"] for t in named.tools] == ["get_weather", "lookup_order"]
    assert named.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert named.messages[0] == {"role": "system", "content": cases.system_prompt()}
    result = by_name["tool_result"]
    assert result.expect is Expect.NO_CALL
    assert len(result.messages) == 4
    assert result.messages[2]["tool_calls"][0]["id"] == "call_w1"
    assert by_name["retry"].kind is cases.Kind.RETRY
    assert by_name["incomplete_args"].max_tokens == 8
    assert not by_name["incomplete_args"].critical


def test_cases_do_not_share_mutable_schemas() -> None:
    """Editing one built case's tool schema leaves the next build untouched."""
    first = cases.shipped_cases()[0]
    first.tools[0]["function"]["parameters"]["required"].append("unit")
    assert cases.shipped_cases()[0].tools[0]["function"]["parameters"]["required"] == ["city"]


def test_a_typo_in_the_case_file_is_refused_naming_the_key() -> None:
    """An unknown key in a case (here `tool_choise`) is a ConfigError naming the file and key."""
    data = yaml.safe_load(resources.files("golive.checks.agent").joinpath("cases.yaml").read_text())
    data["cases"][0]["tool_choise"] = data["cases"][0].pop("tool_choice")
    with pytest.raises(ConfigError, match=r"(?s)cases\.yaml.*tool_choise"):
        validated(cases._CaseFile, data, "golive/checks/agent/cases.yaml")
