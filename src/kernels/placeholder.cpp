// placeholder so the module links before its first source lands
