# shellcheck shell=bash
# PufferTank's interactive shell: sourced from /etc/bash.bashrc (interactive shells only).
case $- in *i*) ;; *) return ;; esac

# Prompt: (puffertank) in cyan, the working folder in bold, a red exit status after a failure.
__puffertank_status() { local s=$?; [ "$s" -ne 0 ] && printf '[%s] ' "$s"; return 0; }
PS1='\[\e[31m\]$(__puffertank_status)\[\e[36m\](puffertank)\[\e[0m\] \[\e[1m\]\w\[\e[0m\] \$ '

export EDITOR=nvim VISUAL=nvim
export HISTCONTROL=ignoreboth HISTSIZE=10000
shopt -s histappend checkwinsize

alias ls='ls --color=auto'
alias ll='ls -alF'
alias la='ls -A'
alias grep='grep --color=auto'
alias vi='nvim'
alias pr='puffer run'
alias pe='puffer envs'
alias pp='puffer plugins'

# Completion for the puffer command, generated when the image was built.
if [ -r /etc/puffertank/puffer-completion.bash ]; then
    # shellcheck source=/dev/null
    . /etc/puffertank/puffer-completion.bash
fi
