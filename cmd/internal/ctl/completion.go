package ctl

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The scripts are urfave/cli's autocomplete/*_autocomplete with the program
// name fixed: both ask the binary itself via --generate-bash-completion.
const bashCompletion = `# timerctl bash completion: source <(timerctl completion bash)
_timerctl_init_completion() {
  COMPREPLY=()
  _get_comp_words_by_ref "$@" cur prev words cword
}

_timerctl_complete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base words
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    else
      _timerctl_init_completion -n "=:" || return
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}

complete -o bashdefault -o default -o nospace -F _timerctl_complete timerctl
`

const zshCompletion = `#compdef timerctl
# timerctl zsh completion: source <(timerctl completion zsh)

_timerctl() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _timerctl timerctl
`

func (r *runner) completion(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("give the shell: bash or zsh", helpFix(c))
	}
	script, ok := map[string]string{"bash": bashCompletion, "zsh": zshCompletion}[c.Args().First()]
	if !ok {
		return usageErr(fmt.Sprintf("no completion for shell %q", c.Args().First()), "use bash or zsh")
	}
	_, err := fmt.Fprint(r.o.Stdout, script)
	return err
}
