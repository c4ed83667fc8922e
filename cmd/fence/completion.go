package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	load "github.com/fence-lock/fence/internal/tools/bench"
	"github.com/fence-lock/fence/internal/tools/chaos"
)

const completionSynopsis = `fence completion bash|zsh|fish

Prints a script that completes fence's commands and each command's flags
(and the values of -o, --workload, --log-level, ...) in the shell. The
script is made from the commands' own flag definitions, so a new flag is
completed as soon as the binary has it. After a lone -- the words are
arguments, not flags: in bash, the command that fence lock runs completes
as a command, and the rest as file names.

  bash: source <(fence completion bash)       # in ~/.bashrc
        or: fence completion bash > /etc/bash_completion.d/fence
  zsh:  source <(fence completion zsh)        # in ~/.zshrc, after compinit
        or: fence completion zsh > "${fpath[1]}/_fence"
  fish: fence completion fish | source        # in ~/.config/fish/config.fish
        or: fence completion fish > ~/.config/fish/completions/fence.fish`

const completionExamples = `  source <(fence completion bash)
  fence completion zsh > ~/.zsh/completions/_fence
  fence completion fish > ~/.config/fish/completions/fence.fish
`

// shells are the shells fence completion writes scripts for.
var shells = []string{"bash", "zsh", "fish"}

// flagValues lists the values of the flags that take one of a few words,
// by flag name, or by command and flag name where commands differ.
var flagValues = map[string][]string{
	"output":         {"text", "json"},
	"o":              {"text", "json"},
	"bench workload": benchWorkloads(),
	"chaos workload": chaos.Workloads,
	"progress":       {"auto", "always", "never"},
	"log-level":      {"debug", "info", "warn", "error"},
	"cluster":        {"etcd", "postgres"},
}

// valuesOf returns the words the value of command's flag may be, if a few.
func valuesOf(command, flag string) []string {
	if v, ok := flagValues[command+" "+flag]; ok {
		return v
	}
	return flagValues[flag]
}

func benchWorkloads() []string {
	names := make([]string, len(load.Workloads))
	for i, w := range load.Workloads {
		names[i] = string(w)
	}
	return names
}

// completionCmd prints the completion script of a shell.
func completionCmd(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("completion", completionSynopsis, completionExamples, std.out)
	positional, _, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return &usageError{errors.New("completion: name the shell: fence completion bash, zsh or fish")}
	}
	spec := completionSpec()
	switch positional[0] {
	case "bash":
		return writeBash(std.out, spec)
	case "zsh":
		return writeZsh(std.out, spec)
	case "fish":
		return writeFish(std.out, spec)
	}
	return &usageError{fmt.Errorf("completion: unknown shell %q: want bash, zsh or fish", positional[0])}
}

// completedCommand is what a completion script knows of a command.
type completedCommand struct {
	name, summary string
	flags         []completedFlag
	args          []string // the words its arguments may be, if a few
	runs          bool     // it runs the command that follows "--" (fence lock)
}

// completedFlag is what a completion script knows of a flag.
type completedFlag struct {
	name, usage string
	takesValue  bool
	values      []string // the words its value may be, if a few
}

// completionSpec collects the visible commands and their flags, from the
// commands' own flag sets.
func completionSpec() []completedCommand {
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	var spec []completedCommand
	for _, c := range commands {
		if c.hidden {
			continue
		}
		cc := completedCommand{name: c.name, summary: c.summary}
		switch c.name {
		case "help":
			cc.args = names
		case "completion":
			cc.args = shells
		case "lock":
			cc.runs = true
		}
		if fs := commandFlags(c.name); fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				if f.Usage == "" {
					return // for tests, not listed
				}
				_, usage := flag.UnquoteUsage(f)
				b, ok := f.Value.(interface{ IsBoolFlag() bool })
				cc.flags = append(cc.flags, completedFlag{
					name: f.Name, usage: shortUsage(usage),
					takesValue: !ok || !b.IsBoolFlag(), values: valuesOf(c.name, f.Name),
				})
			})
		}
		spec = append(spec, cc)
	}
	return spec
}

// shortUsage is the start of a flag's usage, for a completion menu.
func shortUsage(u string) string {
	u = strings.Join(strings.Fields(u), " ")
	for _, sep := range []string{"; ", " (", ": "} {
		if i := strings.Index(u, sep); i > 0 {
			u = u[:i]
		}
	}
	if r := []rune(u); len(r) > 70 {
		u = string(r[:69]) + "…"
	}
	return u
}

func commandNames(spec []completedCommand) string {
	names := make([]string, len(spec))
	for i, c := range spec {
		names[i] = c.name
	}
	return strings.Join(names, " ")
}

// writeBash writes the bash completion script.
func writeBash(w io.Writer, spec []completedCommand) error {
	var b strings.Builder
	fmt.Fprintf(&b, `# bash completion for fence, made by 'fence completion bash'. Load it with
#   source <(fence completion bash)
# or write it to /etc/bash_completion.d/fence.
_fence() {
    local cur prev cmd flags words
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev=""
    if [ "$COMP_CWORD" -gt 0 ]; then
        prev="${COMP_WORDS[COMP_CWORD-1]}"
    fi
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W %s -- "$cur"))
        return 0
    fi
    cmd="${COMP_WORDS[1]}"
    # After a lone "--" the words are arguments, not fence's flags: file
    # names, except for the command that %s runs (a command name,
    # then its own completion where bash-completion's _command_offset is).
    local i
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [ "${COMP_WORDS[i]}" = "--" ]; then
            case "$cmd" in
            %s)
                if [ "$COMP_CWORD" -eq $((i + 1)) ]; then
                    COMPREPLY=($(compgen -c -- "$cur"))
                elif declare -F _command_offset >/dev/null; then
                    _command_offset $((i + 1))
                fi ;;
            esac
            return 0
        fi
    done
    flags=""
    words=""
    case "$cmd" in
`, shQuote(commandNames(spec)+" --help --version"), "fence "+strings.Join(runners(spec), " or fence "), strings.Join(runners(spec), "|"))
	for _, c := range spec {
		fmt.Fprintf(&b, "    %s)\n", c.name)
		var names []string
		valueCases := false
		for _, f := range c.flags {
			names = append(names, dashed(f.name))
			if len(f.values) > 0 {
				if !valueCases {
					b.WriteString("        case \"$prev\" in\n")
					valueCases = true
				}
				fmt.Fprintf(&b, "        -%s|--%s)\n            COMPREPLY=($(compgen -W %s -- \"$cur\"))\n            return 0 ;;\n",
					f.name, f.name, shQuote(strings.Join(f.values, " ")))
			}
		}
		if valueCases {
			b.WriteString("        esac\n")
		}
		fmt.Fprintf(&b, "        flags=%s\n", shQuote(strings.Join(names, " ")))
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "        words=%s\n", shQuote(strings.Join(c.args, " ")))
		}
		b.WriteString("        ;;\n")
	}
	b.WriteString(`    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [ -n "$words" ]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    return 0
}
complete -o default -F _fence fence
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// runners returns the names of the commands that run the command after
// "--".
func runners(spec []completedCommand) []string {
	var names []string
	for _, c := range spec {
		if c.runs {
			names = append(names, c.name)
		}
	}
	return names
}

// writeZsh writes the zsh completion script.
func writeZsh(w io.Writer, spec []completedCommand) error {
	var b strings.Builder
	b.WriteString(`#compdef fence
# zsh completion for fence, made by 'fence completion zsh'. Load it with
#   source <(fence completion zsh)
# after compinit, or write it as _fence into a directory of $fpath.

_fence() {
  # words is zsh's array of the command line; args are the words an
  # argument may be.
  local -a commands flags args
  commands=(
`)
	for _, c := range spec {
		fmt.Fprintf(&b, "    %s\n", shQuote(c.name+":"+c.summary))
	}
	b.WriteString(`  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'fence command' commands
    return
  fi
  case ${words[2]} in
`)
	for _, c := range spec {
		fmt.Fprintf(&b, "    (%s)\n", c.name)
		var valueCases []string
		for _, f := range c.flags {
			if len(f.values) > 0 {
				valueCases = append(valueCases, fmt.Sprintf("        (-%s|--%s) compadd -- %s; return ;;\n", f.name, f.name, strings.Join(f.values, " ")))
			}
		}
		if len(valueCases) > 0 {
			b.WriteString("      case ${words[CURRENT-1]} in\n")
			for _, v := range valueCases {
				b.WriteString(v)
			}
			b.WriteString("      esac\n")
		}
		b.WriteString("      flags=(\n")
		for _, f := range c.flags {
			fmt.Fprintf(&b, "        %s\n", shQuote(dashed(f.name)+":"+f.usage))
		}
		b.WriteString("      )\n")
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "      args=(%s)\n", strings.Join(c.args, " "))
		}
		b.WriteString("      ;;\n")
	}
	b.WriteString(`  esac
  if [[ ${words[CURRENT]} == -* ]]; then
    _describe -t flags 'flag' flags
  elif (( ${#args} )); then
    compadd -- $args
  else
    _files
  fi
}

if [ "$funcstack[1]" = "_fence" ]; then
  _fence "$@"
else
  compdef _fence fence
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFish writes the fish completion script.
func writeFish(w io.Writer, spec []completedCommand) error {
	var b strings.Builder
	b.WriteString(`# fish completion for fence, made by 'fence completion fish'. Load it with
#   fence completion fish | source
# or write it to ~/.config/fish/completions/fence.fish.
`)
	for _, c := range spec {
		fmt.Fprintf(&b, "complete -c fence -f -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, c := range spec {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			opt := "-l " + f.name
			if len(f.name) == 1 {
				opt = "-s " + f.name
			}
			if f.takesValue {
				opt += " -r"
				if len(f.values) > 0 {
					opt += " -f -a " + fishQuote(strings.Join(f.values, " "))
				}
			}
			fmt.Fprintf(&b, "complete -c fence -n %s %s -d %s\n", cond, opt, fishQuote(f.usage))
		}
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "complete -c fence -f -n %s -a %s\n", cond, fishQuote(strings.Join(c.args, " ")))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shQuote quotes s in single quotes for bash and zsh: a quote in s closes
// the quoting, is escaped with a backslash and opens it again.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote quotes s for fish: 'it\'s'.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
