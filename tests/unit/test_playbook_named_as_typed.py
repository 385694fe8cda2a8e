"""A --playbook that names nothing is said as typed, quoted as a shell needs it again, as --host is (`--host
'!a3'`): `-p 'glm5*'` was said `--playbook glm5*`, which pasted back is a glob the shell expands (issue 46, finding
6, the playbook's targeting; the fifteenth newcomer's hour)."""

from __future__ import annotations

import pytest

from fleet import playbook
from fleet.errors import InputError


@pytest.mark.parametrize(("typed", "said"), [("glm5*", "--playbook 'glm5*': no such playbook"),
                                             ("glm5 nvfp4", "--playbook 'glm5 nvfp4': no such playbook"),
                                             ("glm5-nvfp", "--playbook glm5-nvfp: no such playbook; did you mean "
                                                           "glm5-nvfp4?")])
def test_a_playbook_that_names_nothing_is_said_as_typed(typed, said):
    with pytest.raises(InputError) as err:
        playbook.resolve(typed)
    assert str(err.value).startswith(said), str(err.value)
